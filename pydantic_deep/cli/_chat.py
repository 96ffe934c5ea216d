"""`pydantic-deep chat`: the REPL. Lines are prompts or slash commands; output streams as the agent works."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from rich.console import Console

from ..sessions import SessionManager
from ..storage import Storage, open_storage
from ._errors import EXIT_ERROR, EXIT_USAGE, CliError
from ._models import ResolvedModel, probe, resolve_model
from ._slash import QUIT, handle_slash
from ._state import ChatState, existing_session, existing_stored_session
from ._turn import Interrupted, run_cancellable, run_turn
from ._ui import Ui

__all__ = ["ChatOptions", "chat"]

PROMPT = "› "


@dataclass(frozen=True)
class ChatOptions:
    model: str | None
    resume: str | None
    fork: bool
    session_dir: Path
    workdir: Path
    max_cost: Decimal | None = None
    """`--max-cost`: the session's budget in US dollars."""
    store: str | None = None
    """`--store` (or `$PYDANTIC_DEEP_STORE`): a database URL; `None`: the files under `session_dir`."""


def _check_workdir(workdir: Path) -> Path:
    if not workdir.is_dir():
        raise CliError(f"--workdir {workdir}: no such directory", EXIT_USAGE)
    return workdir.resolve()


async def _open(
    options: ChatOptions, manager: SessionManager, writer: Storage | None, resolved: ResolvedModel, ui: Ui
) -> ChatState:
    """Everything checked before anything is written: the session id, its history, then (for --fork) the copy."""
    workdir = _check_workdir(options.workdir)
    if options.resume is None:
        if options.fork:
            raise CliError("--fork needs --resume ID (the session to fork)", EXIT_USAGE)
        return await ChatState.start(manager, resolved, workdir, ui, writer=writer, max_cost=options.max_cost)
    if writer is None:
        info = existing_session(manager, options.resume)
    else:
        info = await existing_stored_session(manager, options.resume)
    if options.fork:
        source = info.id
        info = await manager.fork(source)
        ui.line(f"Forked {source} → {info.id} ({info.message_count} messages).")
    return await ChatState.resume(manager, resolved, workdir, ui, info.id, writer=writer, max_cost=options.max_cost)


def _banner(state: ChatState) -> None:
    ui = state.ui
    what = "new" if state.new else f"resumed, {len(state.history)} messages in the working context"
    ui.line(f"pydantic-deep chat · model {state.resolved.name} · session {state.id} ({what})", style="bold")
    ui.line(f"workdir {state.workdir} · history {state.where} · /help for commands", style="dim")


def _line_reader(console: Console) -> Callable[[], Awaitable[str | None]]:
    """Prompts with prompt-toolkit on a terminal; plain lines from a pipe (scripts, tests)."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        from prompt_toolkit import PromptSession

        session: PromptSession[str] = PromptSession()

        async def prompt() -> str | None:
            while True:
                try:
                    return await session.prompt_async(PROMPT)
                except KeyboardInterrupt:
                    console.print("(Ctrl-C: /quit or Ctrl-D leaves)", style="dim")
                except EOFError:
                    return None

        return prompt

    async def read() -> str | None:
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            return None
        console.print(f"{PROMPT}{line.rstrip()}", markup=False, highlight=False)
        return line

    return read


async def _loop(state: ChatState, read: Callable[[], Awaitable[str | None]]) -> int:
    failures = 0
    while (line := await read()) is not None:
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            try:
                result = await run_cancellable(handle_slash(state, text))
            except Interrupted:
                state.ui.idle()
                state.ui.line(f"⏹ {text.split()[0]} cancelled.", style="yellow")
                continue
            if result == QUIT:
                break
            continue
        outcome = await run_turn(state, text)
        if outcome.status == "cancelled":
            state.ui.line("⏹ turn cancelled; your message is kept in the history.", style="yellow")
        elif outcome.status == "failed":
            failures += 1
            state.ui.line(f"✗ {outcome.error} (your message is kept; try again, or /quit)", style="red")
        if state.measured and state.middleware.usage is not None:
            state.ui.line(state.ui.context_summary(state.middleware.usage))
    if await state.close():
        store = f" --store {state.writer.url}" if state.writer is not None else ""
        state.ui.line(f"Session {state.id} saved. Resume: pydantic-deep chat --resume {state.id}{store}")
    return EXIT_ERROR if failures and not sys.stdin.isatty() else 0


async def chat(options: ChatOptions, console: Console) -> int:
    resolved = resolve_model(options.model)
    await asyncio.to_thread(probe, resolved)
    ui = Ui(console)
    # On a database: the manager's handle lists, forks and reads; the chat records through a handle of its own.
    manager = SessionManager(base_dir=options.session_dir, store=options.store)
    writer = open_storage(options.store) if manager.storage is not None and options.store else None
    try:
        state = await _open(options, manager, writer, resolved, ui)
        _banner(state)
        return await _loop(state, _line_reader(console))
    finally:
        if writer is not None:
            await writer.close()
        await manager.close()
