"""`run_probes`: compact a session with any compaction path, then score its probes on what is left."""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from pydantic_ai.messages import ModelMessage, ModelRequest

from .._messages import summary_info, validate_history
from .._render import render_messages
from .._tokens import count_tokens_approximately
from ..store import HistoryStore
from ._derive import derive_probes
from ._families import build_family_session
from ._probes import Probe, score
from ._report import ProbeReport
from ._session import Session

__all__ = ["CompactFn", "RehydrateFn", "arun_probes", "run_probes"]

CompactFn = Callable[[list[ModelMessage]], Awaitable[list[ModelMessage]] | list[ModelMessage]]
"""A compaction path: messages in, working history out (sync or async), e.g. `middleware.compact`, a
`SummarizationProcessor`, a `SlidingWindowProcessor`, or a function of your own."""
RehydrateFn = Callable[[list[ModelMessage]], Awaitable[Sequence[ModelMessage]] | Sequence[ModelMessage]]
"""Given the compacted working history, the original messages an agent could read back (sync or async)."""

_PAGE = 500


async def arun_probes(
    compact: CompactFn,
    session: Session | Sequence[ModelMessage] | None = None,
    *,
    probes: Sequence[Probe] | None = None,
    messages: int = 200,
    seed: int = 0,
    rehydrate: HistoryStore | RehydrateFn | None = None,
    replay: bool = False,
    name: str | None = None,
    family: str = "coding",
) -> ProbeReport:
    """Compact a session and report how many of its probes are still answerable (the async form of
    [`run_probes`][summarization_pydantic_ai.evals.run_probes]; use it inside a running event loop).

    Args:
        compact: the compaction path to judge (see `CompactFn`). It receives a deep copy of the session.
        session: a [`Session`][summarization_pydantic_ai.evals.Session], your own list of messages (probed with
            [`derive_probes`][summarization_pydantic_ai.evals.derive_probes] unless `probes` is given), or `None`
            for a generated session of `family` (`build_family_session(family, messages, seed)`).
        probes: the probes to score instead of the session's own.
        messages: the size of the generated session (when `session` is `None`).
        seed: the seed of the generated session (when `session` is `None`).
        rehydrate: where the originals behind summaries can be read back: a `HistoryStore` (the ranges each
            summary in the working history names, following rolled-up summaries) or a function. A probe the
            working history cannot answer is checked against what it returns.
        replay: feed the session to `compact` one request at a time, the working history growing as in a run
            (for processors that compact when a trigger fires); by default `compact` is called once on the
            whole session.
        name: the strategy's name in the report (default: the callable's qualified name).
        family: the generated session's family when `session` is `None`: `"coding"` (the default) or
            `"analysis"` (see `SESSION_FAMILIES`).
    """
    if not callable(compact):
        raise TypeError(f"compact must be a callable taking a list of messages, got {compact!r}")
    if session is None:
        session = build_family_session(family, messages, seed)
    elif not isinstance(session, Session):
        originals = list(session)
        session = Session(originals, derive_probes(originals), None, f"{len(originals)} messages")
    chosen = list(session.probes if probes is None else probes)
    originals = copy.deepcopy(session.messages)
    working = await _replay(compact, originals) if replay else await _call(compact, list(originals))
    rehydrated = await _rehydrate(rehydrate, working) if rehydrate is not None else []
    rehydrated_text = render_messages(rehydrated) if rehydrated else ""
    return ProbeReport(
        results=score(chosen, render_messages(working), rehydrated_text),
        strategy=name or _name_of(compact) + (" (replayed)" if replay else ""),
        session=session.name,
        messages_before=len(session.messages),
        messages_after=len(working),
        tokens_before=count_tokens_approximately(session.messages),
        tokens_after=count_tokens_approximately(working),
        # A recorded session may end with the answer of its last run: it is then judged as a finished history.
        problems=[str(p) for p in validate_history(working, for_request=_ends_with_request(session.messages))],
    )


def _ends_with_request(messages: Sequence[ModelMessage]) -> bool:
    return not messages or isinstance(messages[-1], ModelRequest)


def run_probes(
    compact: CompactFn,
    session: Session | Sequence[ModelMessage] | None = None,
    *,
    probes: Sequence[Probe] | None = None,
    messages: int = 200,
    seed: int = 0,
    rehydrate: HistoryStore | RehydrateFn | None = None,
    replay: bool = False,
    name: str | None = None,
    family: str = "coding",
) -> ProbeReport:
    """Compact a session and report how many of its probes are still answerable; see
    [`arun_probes`][summarization_pydantic_ai.evals.arun_probes] for the arguments.

    Synchronous: call it from a script or a test. Inside a running event loop it runs the probes on a worker
    thread with its own loop (it never blocks the caller's loop re-entrantly); there, `await arun_probes(...)`
    is the natural form.

    Example:
        ```python
        report = run_probes(SummarizationProcessor(None, trigger=('messages', 100), keep=20), messages=200)
        print(report)
        ```
    """
    run = functools.partial(
        arun_probes,
        compact,
        session,
        probes=probes,
        messages=messages,
        seed=seed,
        rehydrate=rehydrate,
        replay=replay,
        name=name,
        family=family,
    )
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="run_probes") as pool:
        return pool.submit(lambda: asyncio.run(run())).result()


async def _call(compact: CompactFn, messages: list[ModelMessage]) -> list[ModelMessage]:
    result = compact(messages)
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(cast(object, result), list | tuple):
        raise TypeError(f"the compaction returned {type(result).__name__}, not a list of messages")
    return list(cast(Sequence[ModelMessage], result))


async def _replay(compact: CompactFn, messages: list[ModelMessage]) -> list[ModelMessage]:
    """Grow the working history request by request, compacting before each one as a run would."""
    working: list[ModelMessage] = []
    start = 0
    for index, message in enumerate(messages):
        if isinstance(message, ModelRequest):
            working = await _call(compact, [*working, *messages[start : index + 1]])
            start = index + 1
    return [*working, *messages[start:]]


async def _rehydrate(source: HistoryStore | RehydrateFn, working: list[ModelMessage]) -> list[ModelMessage]:
    if isinstance(source, HistoryStore):
        return await _read_covered(source, working)
    result = source(working)
    if inspect.isawaitable(result):
        result = await result
    return list(result)


async def _read_covered(store: HistoryStore, working: list[ModelMessage]) -> list[ModelMessage]:
    """The originals each summary names (`first_id`..`last_id`), and those of the summaries it replaced."""
    found: list[ModelMessage] = []
    pending = [info for info in map(summary_info, working) if info is not None]
    seen: set[str] = set()
    while pending:
        info = pending.pop()
        first, last = info.get("first_id"), info.get("last_id")
        if isinstance(first, str) and isinstance(last, str):
            found.extend(await _read_range(store, first, last))
        for replaced in cast(list[Any], info.get("replaces_summaries") or []):
            if isinstance(replaced, str) and replaced not in seen and replaced in store:
                seen.add(replaced)
                page = await store.read(replaced, replaced, limit=1)
                pending.extend(i for i in map(summary_info, page.messages) if i is not None)
    return found


async def _read_range(store: HistoryStore, first: str, last: str) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    offset: int | None = 0
    while offset is not None:
        page = await store.read(first, last, offset=offset, limit=_PAGE)
        messages.extend(page.messages)
        offset = page.next_offset
    return messages


def _name_of(compact: Any) -> str:
    name = getattr(compact, "__qualname__", None)
    if isinstance(name, str):
        return name
    return type(compact).__name__
