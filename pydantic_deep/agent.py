"""`create_deep_agent`: one call builds a pydantic-ai agent whose context cannot blow up.

The processing order is fixed — the spine of the toolkit:

```
PatchToolCalls -> EvictionProcessor -> your processors -> ContextManagerMiddleware (persist, count, compress)
```

so histories are repaired before anything reads them, large outputs are evicted before tokens are counted, and the
history store records what the model is finally sent; after it, `EvictedOutputIndexer` makes the full text of each
evicted output searchable with the recorded message holding its preview. With `context=ContextConfig(...)` the
strategy's steps (compress, checkpoint, prune, slide) open the "your processors" slot and its middleware is the
context manager; its `ContextMetrics`, an observer, sits outside the spine (first), to see each request as it comes
and as it goes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability, Caching
from pydantic_ai.toolsets import FunctionToolset

from summarization_pydantic_ai import (
    AgentDrivenCompression,
    ContextManagerMiddleware,
    CostTrackingMiddleware,
    TokenCounter,
    UsageAnchoredCounter,
    count_tokens_approximately,
)
from summarization_pydantic_ai.strategies import ContextConfig

from ._sizing import context_window, default_cache_policy, default_eviction
from .deps import DeepAgentDeps
from .eviction import EvictedOutputIndexer, EvictionProcessor
from .filesystem import DEFAULT_HIDDEN_DIRS, FilesystemToolset
from .history_search import HistoryArchiveSearch
from .memory import AgentMemoryToolset
from .patch import PatchToolCalls
from .storage import MemoryStore, Storage, open_storage
from .todos import TodoCapability

__all__ = ["DEFAULT_INSTRUCTIONS", "backend_memory_reader", "create_deep_agent", "session_messages_path"]

DEFAULT_INSTRUCTIONS = """\
You are a careful agent working in a virtual file system (paths start at /).
Use ls, glob, grep and read_file to look, write_file and edit_file to change files.
Large tool outputs are saved under /large_tool_results/ and replaced by a preview: page through the file with
read_file(path, offset, limit) when you need more than the preview.
For multi-step work keep a todo list with write_todos and update it as you go."""


def session_messages_path(ctx: RunContext[Any]) -> Any:
    """The run's `messages.json` (`DeepAgentDeps.messages_path`), or `None` when the deps keep nothing on disk."""
    return getattr(ctx.deps, "messages_path", None)


async def backend_memory_reader(ctx: RunContext[Any], path: str) -> str | None:
    """Read the agent's memory file where its file tools write it: the run's `deps.backend`
    (an `AgentDrivenCompression` `reader`). A missing file raises `FileNotFoundError`, which means "not written"."""
    backend = getattr(ctx.deps, "backend", None)
    if backend is None:
        raise RuntimeError("the run's deps have no backend to read the memory file from (use DeepAgentDeps)")
    return await backend.read(path)


@dataclass
class _BindContextManager(AbstractCapability[Any]):
    """Hands the run's deps the middleware, so `/compact` and `/context` reach the very instance in use."""

    middleware: ContextManagerMiddleware

    async def before_run(self, ctx: RunContext[Any]) -> None:
        if hasattr(ctx.deps, "context_manager"):
            ctx.deps.context_manager = self.middleware

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None


def _history_source(storage: Storage | None) -> dict[str, Any]:
    """Where the default context manager keeps each run's session: messages.json, or the storage's database."""
    if storage is None:
        return {"messages_path": session_messages_path}
    history = storage.history
    return {"history_store": lambda ctx: history.session(ctx.deps.session_id)}  # pyright: ignore[reportUnknownLambdaType, reportUnknownMemberType, reportUnknownArgumentType]


def _memory_of(storage: Storage | None) -> MemoryStore | None:
    """The storage's memories (for `file://`, MEMORY.md files under its base directory); `None`: the session layout."""
    return None if storage is None else storage.memory


def _pick(value: Any, kind: type[Any], default: Any, name: str) -> Any:
    """`True` -> the default instance, an instance -> itself, `False`/`None` -> left out."""
    if value is True:
        return default()
    if value is False or value is None:
        return None
    if isinstance(value, kind):
        return value
    raise TypeError(f"{name} must be True, False, None or a {kind.__name__}, got {value!r}")


def _static_tool_names(toolset: Any) -> Sequence[str]:
    """The tools a toolset will define, when known before a run (a `FunctionToolset` or the history search)."""
    if isinstance(toolset, HistoryArchiveSearch):
        return toolset.tool_names
    if isinstance(toolset, FunctionToolset):
        return list(cast(FunctionToolset[Any], toolset).tools)
    return ()


def _refuse_tool_name_conflicts(middleware: ContextManagerMiddleware | None, toolsets: Sequence[Any]) -> None:
    """Two features defining one tool name fail at the agent's first run; say so at construction instead."""
    providers: dict[str, list[str]] = {}
    if middleware is not None and middleware.expose_history_tool:
        providers.setdefault("read_history", []).append("ContextManagerMiddleware(expose_history_tool=True)")
    for toolset in toolsets:
        label = "history search" if isinstance(toolset, HistoryArchiveSearch) else type(toolset).__name__
        for name in _static_tool_names(toolset):
            providers.setdefault(name, []).append(label)
    for name, owners in providers.items():
        if len(owners) < 2:
            continue
        hint = (
            "keep one: ContextManagerMiddleware(expose_history_tool=False) (the search's read_history reads the "
            "history it searches), or HistoryArchiveSearch(read_history_tool=False) (the middleware's read_history "
            "serves both, and its summaries name the ids to read)"
            if name == "read_history" and any(o.startswith("ContextManagerMiddleware") for o in owners)
            else "keep only one of them, or rename one with toolset.renamed({...}) / toolset.prefixed(...)"
        )
        raise ValueError(f"two features define the tool {name!r}: {' and '.join(owners)}; {hint}")


def _default_middleware(
    context: ContextConfig | None, model: Any, counter: TokenCounter, storage: Storage | None, window: int | None
) -> Any:
    """The factory of the default context manager (the strategy's, when there is one), keeping the session where
    `storage` says: messages.json in the session layout, or the storage's database. Without a strategy it works
    against `window` (`None`: the run's model's) and plans its compactions with the model's cache prices."""
    source = _history_source(storage)
    if context is None:
        policy = default_cache_policy(model)
        return lambda: ContextManagerMiddleware(**source, token_counter=counter, max_tokens=window, cache_policy=policy)
    return lambda: context.middleware(model, **source, token_counter=counter)


def _session_store(middleware: ContextManagerMiddleware | None) -> Any:
    """The store phase checkpoints archive in: the one the middleware writes for the run's session."""
    source = None if middleware is None else middleware.messages_path
    if middleware is None or not callable(source):
        return None if middleware is None else middleware.store

    def store(ctx: RunContext[Any]) -> Any:
        path = source(ctx)
        return None if path is None else middleware.store_for(path)

    return store


def _check_context(context: Any, context_manager: Any) -> None:
    if context is None:
        return
    if not isinstance(context, ContextConfig):
        raise TypeError(f"context must be a ContextConfig, got {context!r}")
    if isinstance(context_manager, ContextManagerMiddleware):
        raise ValueError(
            "pass either context=ContextConfig(...) (it builds the context manager) or context_manager=, not both; "
            "to tune the strategy's middleware use context.middleware(model, ...) and no context="
        )
    if context_manager in (False, None) and context.strategy == "summarize":
        raise ValueError("the 'summarize' strategy summarizes in the context manager: leave context_manager on")


def create_deep_agent(
    model: Any = None,
    *,
    instructions: Any = DEFAULT_INSTRUCTIONS,
    tools: Sequence[Any] = (),
    toolsets: Sequence[Any] = (),
    context_manager: ContextManagerMiddleware | bool | None = True,
    cost_tracking: CostTrackingMiddleware | bool | None = True,
    agent_driven: AgentDrivenCompression | bool | None = None,
    eviction: EvictionProcessor | bool | None = True,
    memory: AgentMemoryToolset | bool | None = None,
    history_search: HistoryArchiveSearch | bool | None = None,
    todos: bool = True,
    filesystem: bool = True,
    patch_tool_calls: bool = True,
    prompt_caching: bool = True,
    capabilities: Sequence[AbstractCapability[Any]] = (),
    context: ContextConfig | None = None,
    store: str | os.PathLike[str] | Storage | None = None,
    max_tokens: int | None = None,
    **agent_kwargs: Any,
) -> Agent[DeepAgentDeps, Any]:
    """Build an agent with file tools, todos, eviction and the context manager, in the documented order.

    Args:
        model: any pydantic-ai model or model name.
        instructions: the agent's instructions (default: `DEFAULT_INSTRUCTIONS`).
        tools: extra tools; toolsets: extra toolsets.
        context_manager: a `ContextManagerMiddleware`, `True` for one writing
            `.pydantic-deep/sessions/<id>/messages.json` (per `DeepAgentDeps`), or `False`/`None` for none.
        cost_tracking: a `CostTrackingMiddleware` (for budgets), `True` for one that prices every request and
            continues the session's totals from the context manager's store, or `False`/`None` for none. It runs
            right after the context manager (it checks budgets against the compacted request).
        agent_driven: an `AgentDrivenCompression`, `True` for one that reads the memory file on `deps.backend`
            (where `write_file` writes it), measures with the context manager's counter (usage-anchored when the
            context manager is the default one) and records and falls back through it, or off.
        eviction: an `EvictionProcessor`, `True` for the defaults (`/large_tool_results/`; outputs above a tenth of
            the context window when it is known, at most 20,000 tokens, and a step's outputs together above a
            quarter of it), or off.
        memory: an `AgentMemoryToolset`, `True` for one in the run's session layout
            (`<deps.base_dir>/<deps.agent_name>/MEMORY.md`; with `base_dir=None`, on `deps.backend`), or off.
        history_search: a `HistoryArchiveSearch`, `True` for one over the run's session file, or off.
        todos: add `write_todos`/`read_todos` (the list lives in the history, where `write_todos` returns it).
        filesystem: add the file tools (`ls`, `read_file`, `write_file`, `edit_file`, `glob`, `grep`).
        patch_tool_calls: repair histories (unanswered or misplaced tool results) before anything reads them.
        prompt_caching: ask the provider to cache the prompt (pydantic-ai's `Caching`: breakpoints at the end of
            the tool definitions and instructions, the stable head, and at the end of the request; providers that
            cache on their own ignore it). Off: the provider's default (Anthropic then caches nothing).
        capabilities: your processors and capabilities; they run between eviction and the context manager.
        context: a `ContextConfig` (a strategy preset): its processors run first in the user-processor slot, its
            middleware is the context manager (writing the session's `messages.json`), and its metrics observe
            every request from the outside. Leave `context_manager` at its default with it (or `False`).
        store: where sessions live: a URL (`file://...`, `sqlite:///agents.db`, `postgresql://...`) or a `Storage`
            (`open_storage(url)`). The default context manager, memory and history search then keep each run's
            session (`deps.session_id`) there instead of `<deps.base_dir>/sessions/<id>/messages.json`. `None`:
            messages.json in the session layout.
        max_tokens: the model's context window, when genai-prices does not know it (or a smaller one to work
            within): the default context manager works against it and the default eviction scales with it. With
            `context=`, set it on the `ContextConfig`; with your own context manager, on that.
        **agent_kwargs: passed to `Agent` (e.g. `output_type`, `name`, `retries`).

    Example:
        ```python
        agent = create_deep_agent('openai:gpt-4.1')
        result = await agent.run('Summarize the repository', deps=DeepAgentDeps())
        ```
    """
    # With agent-driven compression both measure alike (usage-anchored), so its trigger comes first.
    counter: TokenCounter = UsageAnchoredCounter() if agent_driven else count_tokens_approximately
    _check_context(context, context_manager)
    storage = store if isinstance(store, Storage) or store is None else open_storage(store)
    window = context_window(model, max_tokens, context, context_manager)
    middleware = _pick(
        context_manager,
        ContextManagerMiddleware,
        _default_middleware(context, model, counter, storage, max_tokens),
        "context_manager",
    )
    evictor = _pick(eviction, EvictionProcessor, lambda: default_eviction(window), "eviction")
    if evictor is not None and middleware is not None and middleware.max_tool_output_tokens is not None:
        raise ValueError(
            "ContextManagerMiddleware.max_tool_output_tokens would cut tool outputs before eviction saves them "
            "(tool hooks run innermost first); leave it None when eviction is on, the full output stays readable"
        )
    spine: list[AbstractCapability[Any]] = []
    if context is not None and context.metrics is not None:
        spine.append(context.metrics)  # an observer, outermost: it sees each request as it comes and as it goes
    if patch_tool_calls:
        spine.append(PatchToolCalls())
    if evictor is not None:
        spine.append(evictor)
    if context is not None:
        spine.extend(context.processors(model, history_store=_session_store(middleware)))
    spine.extend(capabilities)
    if middleware is not None:
        spine += [middleware, _BindContextManager(middleware)]
        if evictor is not None:  # after the middleware: it indexes what the middleware has just recorded
            spine.append(EvictedOutputIndexer(middleware=middleware, eviction=evictor))
    cost = _pick(
        cost_tracking,
        CostTrackingMiddleware,
        lambda: CostTrackingMiddleware(context_manager=middleware),
        "cost_tracking",
    )
    if cost is not None:
        spine.append(cost)
    compression = _pick(
        agent_driven,
        AgentDrivenCompression,
        lambda: AgentDrivenCompression(
            reader=backend_memory_reader,
            middleware=middleware,
            token_counter=middleware.token_counter if middleware is not None else UsageAnchoredCounter(),
        ),
        "agent_driven",
    )
    if compression is not None:
        spine.append(compression)  # after the middleware: it records what the request carries before the cut
    extras: list[Any] = [
        item
        for item in (
            _pick(memory, AgentMemoryToolset, lambda: AgentMemoryToolset(store=_memory_of(storage)), "memory"),
            _pick(
                history_search,
                HistoryArchiveSearch,
                lambda: HistoryArchiveSearch(database=storage.history if storage is not None else None),
                "history_search",
            ),
        )
        if item is not None
    ]
    extra_toolsets: list[Any] = []
    for item in extras:
        if isinstance(item, AbstractCapability):
            spine.append(cast(AbstractCapability[Any], item))
        else:
            extra_toolsets.append(item)  # the history search is a toolset itself
    _refuse_tool_name_conflicts(middleware, [*extra_toolsets, *toolsets])
    if todos:
        spine.append(TodoCapability())
    if prompt_caching:
        spine.append(Caching())
    # The archive previews point into stays out of ls/glob/grep of the project (read_file still reads it).
    hidden = {*DEFAULT_HIDDEN_DIRS, *([evictor.eviction_path] if evictor is not None else [])}
    all_toolsets = [
        *([FilesystemToolset(hidden_dirs=sorted(hidden))] if filesystem else []),
        *extra_toolsets,
        *toolsets,
    ]
    return Agent(
        model,
        deps_type=DeepAgentDeps,
        instructions=instructions,
        tools=list(tools),
        toolsets=all_toolsets,
        capabilities=spine,
        **agent_kwargs,
    )
