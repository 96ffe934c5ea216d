"""The chat's slash commands: /compact, /context, /memory, /search, /sessions, /fork, /checkpoint, /rewind, ..."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio.to_thread
from rich.text import Text

from summarization_pydantic_ai import (
    DEFAULT_MAX_TOKENS,
    ContextUsage,
    CostTotals,
    InvalidSessionIdError,
    count_tokens_approximately,
    format_cost,
    is_summary_message,
    resolve_max_tokens,
    summary_part,
)
from summarization_pydantic_ai.store import SearchQueryError

from ..checkpoints import CheckpointNotFoundError, InvalidCheckpointIdError
from ..history_search import HistoryArchiveSearch, QueryError
from ..sessions import ForkPointError, MessageNotFoundError, SessionNotFoundError
from ._render import checkpoints_table, sessions_table
from ._state import ChatState
from ._ui import format_bytes, usage_bar

__all__ = ["COMMANDS", "QUIT", "handle_slash"]

QUIT = "quit"
Handler = Callable[[ChatState, str], Awaitable[str | None]]


async def _help(state: ChatState, arg: str) -> None:
    for name, (_, text) in COMMANDS.items():
        state.ui.line(f"  {name:<22} {text}")
    state.ui.line("  Ctrl-C cancels a running turn (your message is kept); Ctrl-D or /quit leaves.", style="dim")


async def _quit(state: ChatState, arg: str) -> str:
    return QUIT


def _headings(state: ChatState) -> list[str]:
    """The sections of the latest summary in the working context (what the summary preserved)."""
    for message in reversed(state.history):
        if is_summary_message(message) and (part := summary_part(message)) is not None:
            found = [line[3:].strip() for line in (part.content or "").splitlines() if line.startswith("## ")]
            return list(dict.fromkeys(found))  # an earlier summary nests its own sections
    return []


async def _compact(state: ChatState, arg: str) -> None:
    ui = state.ui
    if not state.history:
        ui.line("Nothing to compact yet.")
        return
    seen, fallbacks, failures = len(ui.compactions), len(ui.fallbacks), len(ui.failures)
    ui.busy("compacting…")
    compacted = await state.middleware.compact(state.history, arg.strip() or None)
    ui.idle()
    if len(ui.failures) > failures:
        return  # the failure was reported as it happened; the history is as it was
    if len(ui.compactions) == seen:
        ui.line("Nothing to compact: the history is already as short as the kept messages (nothing was changed).")
        return
    state.history, event = compacted, ui.compactions[-1]
    state.measured = False
    ui.line(
        f"Compacted: ~{event.tokens_before:,} → ~{event.tokens_after:,} tokens of messages; "
        f"{event.summarized_messages} messages summarized, {event.messages_after - 1} kept verbatim after the summary.",
        style="bold",
    )
    if arg.strip():
        ui.line(f"Focus: {arg.strip()}")
    sections = _headings(state)
    if sections:
        ui.line(f"Preserved in the summary: {', '.join(sections)}.")
    if len(ui.fallbacks) > fallbacks:
        ui.line("The summary model failed: this summary is a deterministic extract (trimmed), not an LLM summary.")
    elif event.summarizer == "deterministic":
        ui.line("No LLM summary with this model: the deterministic summarizer extracted it (no model call).")
    ui.line(f"Every original message stays in {state.where} (/search finds them).", style="dim")


_ESTIMATED = " (messages only, estimated: measured with instructions and tools at the next request)"


async def context_report(state: ChatState) -> list[Text | str]:
    """The lines of `/context`."""
    usage = state.middleware.usage if state.measured else None
    estimated = usage is None
    if usage is None:  # no request since the history changed (resumed, compacted): measure the messages alone
        window = state.resolved.max_tokens or resolve_max_tokens(state.resolved.name) or DEFAULT_MAX_TOKENS
        usage = ContextUsage(
            count_tokens_approximately(state.history),
            window,
            state.middleware.compress_threshold,
            len(state.history),
            0,
            None,
        )
    info = await state.describe()
    if state.writer is None:
        path = state.messages_path
        size = path.stat().st_size if path.is_file() else None
    else:
        size = info.size_bytes
    return [
        Text("Context  ").append(usage_bar(usage.tokens, usage.max_tokens, usage.threshold)),
        f"Tokens      ~{usage.tokens:,} / {usage.max_tokens:,}" + (_ESTIMATED if estimated else ""),
        f"Threshold   {usage.threshold:.0%} (compaction at ~{usage.threshold_tokens:,} tokens)",
        f"Messages    {len(state.history)} in the working context",
        f"Compactions {info.compactions} in this session",
        f"Cost        {_cost_line(info.cost)}",
        f"History     {state.where} ({format_bytes(size)})",
        f"Session     {state.id}",
        *_metrics_lines(state),
    ]


def _cost_line(totals: CostTotals) -> str:
    total = totals.total
    if not total.requests:
        return "nothing spent yet"
    return f"{format_cost(total)} this session ({total.requests:,} requests, {total.total_tokens:,} tokens)"


async def cost_report(state: ChatState) -> list[str]:
    """The lines of `/cost`: the session's spend by kind (from its history), the last turn, the budget."""
    totals = await state.session_cost()
    lines = [f"Session     {_cost_line(totals)}"]
    for label, spend in (
        ("Agent", totals.agent),
        ("Summarizer", totals.summarizer),
        ("Retries", totals.overflow_retry),
    ):
        if spend.requests:
            cached = f", {spend.cache_read_tokens:,} read from cache" if spend.cache_read_tokens else ""
            lines.append(
                f"{label:<11} {format_cost(spend)}: {spend.requests:,} requests, {spend.input_tokens:,} in{cached}, "
                f"{spend.output_tokens:,} out"
            )
    lines += _cache_lines(totals)
    run = state.cost.run_totals
    if run is not None:
        lines.append(f"Last turn   {format_cost(run)} ({run.total.requests:,} requests)")
    if totals.unpriced_models:
        lines.append(f"Unpriced    {', '.join(totals.unpriced_models)} (unknown to genai-prices: tokens only)")
    if state.max_cost is not None:
        spent = totals.total.known_cost_usd
        lines.append(f"Budget      {format_cost(spent)} of {format_cost(state.max_cost)} (--max-cost)")
    return lines


def _cache_lines(totals: CostTotals) -> list[str]:
    """The prompt cache's share of the input, and what the reductions saved net of the cache re-writes they caused
    (the compactions' savings at the input price for a session recorded without cache figures)."""
    lines: list[str] = []
    cache = totals.cache
    if cache.requests:
        estimated = cache.requests - cache.reported_requests
        tokens = cache.tokens
        lines.append(
            f"Cache       {cache.cache_read_share:.0%} of input read from the prompt cache "
            f"({tokens.cache_read_tokens:,} read, {tokens.cache_write_tokens:,} written, "
            f"{tokens.uncached_tokens:,} uncached"
            + (f"; {estimated:,} of {cache.requests:,} requests estimated" if estimated else "")
            + f"): {format_cost(cache.cost_usd)} with the cache counted"
        )
    if totals.reductions:
        lines.append(
            f"Net saved   {format_cost(totals.net_saved_usd, signed=True)} by {len(totals.reductions)} rewrite(s) "
            f"of the history, after {format_cost(totals.rewrite_cost_usd)} of cache re-writes they caused"
        )
    elif totals.savings:
        saved = totals.saved_usd
        lines.append(
            f"Saved       ~{totals.tokens_saved:,} tokens not re-sent after {len(totals.savings)} compaction(s)"
            + (f" (~{format_cost(saved)}, prompt cache not counted)" if saved is not None else "")
        )
    return lines


async def _cost(state: ChatState, arg: str) -> None:
    for line in await cost_report(state):
        state.ui.line(line)


def _metrics_lines(state: ChatState) -> list[Text | str]:
    """The `ContextMetrics` summary of this chat (requests made since the session was opened here)."""
    summary = state.metrics.summary()
    if not summary.requests:
        return [Text("Metrics     no request yet in this chat", style="dim")]
    return [Text("Metrics (this chat)", style="bold"), *summary.lines()]


async def _context(state: ChatState, arg: str) -> None:
    for line in await context_report(state):
        state.ui.line(line)


async def _memory(state: ChatState, arg: str) -> None:
    storage = state.manager.storage
    if storage is None:
        path = Path(state.deps.memory_dir or ".") / "MEMORY.md"
        where = str(path)
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
    else:
        where = f"the memory of {state.deps.agent_name!r} in {storage.url}"
        text = await storage.memory.read(state.deps.agent_name) or ""
    if not text.strip():
        state.ui.line(f"Memory is empty ({where} is written when the agent calls write_memory).")
        return
    state.ui.line(f"{where}:", style="bold")
    state.ui.line(text.rstrip())


async def _search(state: ChatState, arg: str) -> None:
    if not arg.strip():
        state.ui.line("Usage: /search QUERY")
        return
    if not await state.recorded():
        state.ui.line("Nothing to search yet.")
        return
    storage = state.manager.storage
    if storage is None:
        search = HistoryArchiveSearch(messages_path=state.messages_path, backend=state.deps.backend)
    else:
        search = HistoryArchiveSearch(database=storage.history)
    try:
        result = await search.search(arg.strip(), session=None if storage is None else state.id)
    except (QueryError, SearchQueryError) as exc:
        state.ui.line(f"Bad query: {exc}")
        return
    state.ui.line(result.text)


async def _sessions(state: ChatState, arg: str) -> None:
    console = state.ui.console
    console.print(sessions_table(await state.manager.list_async(), current=state.id, width=console.width))


async def _fork(state: ChatState, arg: str) -> None:
    if not state.history:
        state.ui.line("Nothing to fork yet: send a message first.")
        return
    old = state.id
    try:
        info = await state.manager.fork(old, at_message_id=arg.strip() or None)
    except (SessionNotFoundError, MessageNotFoundError, ForkPointError, InvalidSessionIdError) as exc:
        state.ui.line(f"Cannot fork: {exc}")
        return
    await state.switch(info.id)
    state.ui.line(f"Forked {old} → {info.id} ({info.message_count} messages); you are now in {info.id}.")
    state.ui.line(f"Back to the original: pydantic-deep chat --resume {old}", style="dim")


async def _checkpoint(state: ChatState, arg: str) -> None:
    if not state.history:
        state.ui.line("Nothing to checkpoint yet.")
        return
    try:
        checkpoint = await state.checkpoints.checkpoint(state.history, arg.strip() or None)
    except ForkPointError as exc:  # e.g. the last turn was cancelled while tools ran
        state.ui.line(f"Cannot checkpoint here: {exc}")
        return
    state.ui.line(
        f"Checkpoint {checkpoint.id} ({checkpoint.name}) at message {checkpoint.message_count}; "
        f"/rewind {checkpoint.id} continues from here (in a new session)."
    )


async def _checkpoints(state: ChatState, arg: str) -> None:
    store = state.checkpoints.checkpoint_store
    listed = await anyio.to_thread.run_sync(store.list) if store is not None else []
    if not listed:
        state.ui.line("No checkpoints yet: every turn makes one, /checkpoint [name] a named one.")
        return
    state.ui.console.print(checkpoints_table(listed))
    state.ui.line("Usage: /rewind ID", style="dim")


async def _rewind(state: ChatState, arg: str) -> None:
    if not arg.strip():
        await _checkpoints(state, arg)
        return
    old = state.id
    try:  # a fork at the checkpoint's message: the original session keeps what came after
        info = await state.manager.rewind(old, arg.strip())
    except (CheckpointNotFoundError, InvalidCheckpointIdError, MessageNotFoundError, ForkPointError) as exc:
        state.ui.line(f"Cannot rewind: {exc}")
        return
    await state.switch(info.id)
    state.ui.line(
        f"Rewound to checkpoint {arg.strip()}: {len(state.history)} messages, in the new session {info.id} "
        f"(session {old} keeps everything after it)."
    )


COMMANDS: dict[str, tuple[Handler, str]] = {
    "/compact [focus]": (_compact, "summarize the older messages now (optionally focused on a topic)"),
    "/context": (_context, "context usage: tokens, threshold, messages, compactions, history file"),
    "/cost": (_cost, "what the session cost: by kind, saved by compaction, the last turn, the budget"),
    "/memory": (_memory, "show the agent's MEMORY.md"),
    "/search QUERY": (_search, "search the full history of this session (compacted messages too)"),
    "/sessions": (_sessions, "list the sessions"),
    "/fork [MESSAGE_ID]": (_fork, "continue in a copy of this session (up to a message; default: all)"),
    "/checkpoint [name]": (_checkpoint, "save a named checkpoint of the conversation"),
    "/checkpoints": (_checkpoints, "list this session's checkpoints"),
    "/rewind [ID]": (_rewind, "continue from a checkpoint, in a new session (no ID: list them)"),
    "/help": (_help, "this list"),
    "/quit": (_quit, "leave (the session is saved; resume with --resume ID)"),
}
_BY_NAME = {spec.split()[0]: handler for spec, (handler, _) in COMMANDS.items()} | {"/exit": _quit}


async def handle_slash(state: ChatState, line: str) -> str | None:
    """Run a slash command; returns `QUIT` to leave the chat."""
    name, _, arg = line.strip().partition(" ")
    handler = _BY_NAME.get(name.lower())
    if handler is None:
        state.ui.line(f"Unknown command {name}; /help lists the commands.")
        return None
    return await handler(state, arg)
