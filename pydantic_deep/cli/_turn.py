"""One turn of the chat: stream the agent's run to the terminal; Ctrl-C cancels it and keeps the user's message."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelAPIError, UsageLimitExceeded, UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart
from pydantic_ai.run import AgentRun

from summarization_pydantic_ai import (
    BudgetExceededError,
    HistoryStoreConflictError,
    HistoryStoreError,
    ensure_message_id,
    get_message_id,
)
from summarization_pydantic_ai.cost import amount_text

from ._state import ChatState

__all__ = ["Interrupted", "TurnOutcome", "keep_cancelled_turn", "run_cancellable", "run_turn"]

T = TypeVar("T")

REBASED_KEY = "pydantic_deep.rebased_from"
"""In the metadata of a prompt the chat recorded again after another writer's messages: the id of its first
record (written before theirs, when the turn started)."""


class Interrupted(Exception):
    """Ctrl-C cancelled the work (`run_cancellable`)."""


@dataclass(frozen=True)
class TurnOutcome:
    status: str
    """`'done'`, `'cancelled'` or `'failed'`."""
    error: str | None = None


def _has_prompt(messages: Sequence[ModelMessage], prompt: str) -> bool:
    return any(
        isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) and p.content == prompt for p in m.parts)
        for m in messages
    )


def keep_cancelled_turn(before: list[ModelMessage], run: list[ModelMessage], prompt: str) -> list[ModelMessage]:
    """The history after a cancelled or failed turn: what the run committed (possibly compacted; its unanswered
    tool calls are repaired by `PatchToolCalls` at the next run), and at least the user's message."""
    history = list(run) if run else list(before)
    known = {id(m) for m in before}
    if not _has_prompt([m for m in history if id(m) not in known], prompt):
        history.append(ModelRequest(parts=[UserPromptPart(prompt)]))
    return history


async def _record(state: ChatState, messages: Sequence[ModelMessage]) -> None:
    """Append what a cancelled run had not recorded yet (the middleware records at the next request or at the
    end of a run, neither of which came)."""
    store = state.history_store
    new = [message for message in messages if ensure_message_id(message) not in store]
    if new:
        await store.append(new)


async def _stream_run(state: ChatState, prompt: str, runs: list[AgentRun[Any, Any]]) -> list[ModelMessage]:
    ui = state.ui
    async with state.agent.iter(prompt, deps=state.deps, message_history=state.history) as run:
        runs.append(run)  # read if the turn is cancelled: what it had committed so far
        async for node in run:
            if Agent.is_model_request_node(node):
                ui.busy("thinking…")
                async with node.stream(run.ctx) as stream:
                    async for event in stream:
                        ui.stream_event(event)
            elif Agent.is_call_tools_node(node):
                async with node.stream(run.ctx) as stream:
                    async for event in stream:
                        ui.stream_event(event)
        result = run.result
        assert result is not None
        return result.all_messages()


def _describe_error(state: ChatState, exc: BaseException) -> str:
    if isinstance(exc, ModelAPIError):
        return f"the model {state.resolved.name} failed: {exc}".splitlines()[0]
    if isinstance(exc, BudgetExceededError):
        limit, spent = amount_text(exc.limit), amount_text(exc.spent)
        return f"--max-cost {limit} reached ({spent} spent): the request was not sent; raise --max-cost to go on"
    if isinstance(exc, HistoryStoreError | UsageLimitExceeded | UserError):
        return str(exc).splitlines()[0]
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


async def run_turn(state: ChatState, prompt: str, *, retried: bool = False) -> TurnOutcome:
    """Run one turn; the history in `state` ends with it (complete, or cancelled with the user's message kept).
    When another worker appended to the session meanwhile (a database store), the chat reloads it and runs the
    turn again on top of theirs (`retried`: once)."""
    before = list(state.history)
    runs: list[AgentRun[Any, Any]] = []
    try:
        state.history = await run_cancellable(_stream_run(state, prompt, runs))
        state.measured = True
        return TurnOutcome("done")
    except Interrupted:
        outcome = TurnOutcome("cancelled")
    except HistoryStoreConflictError:
        outcome = None
    except Exception as exc:
        outcome = TurnOutcome("failed", _describe_error(state, exc))
    finally:
        state.ui.idle()
        state.ui.end_line()
    if outcome is None:
        return await _after_conflict(state, before, runs[0].all_messages() if runs else [], prompt, retried=retried)
    state.history = keep_cancelled_turn(before, runs[0].all_messages() if runs else [], prompt)
    try:
        await _record(state, state.history)
    except HistoryStoreError as exc:  # e.g. the file is locked by another chat: the history stays in memory
        return TurnOutcome(outcome.status, f"{outcome.error or 'cancelled'}; not saved: {exc}".splitlines()[0])
    return outcome


async def _after_conflict(
    state: ChatState, before: list[ModelMessage], run: list[ModelMessage], prompt: str, *, retried: bool
) -> TurnOutcome:
    """Another writer appended to the session since the chat read it, and this turn's append was refused (nothing
    of it written). Reload; with no answer yet, send the message again on top of theirs; else keep what this
    turn got after theirs (recorded now), so nothing is lost and nothing recorded twice."""
    known = {id(m) for m in before}
    mine = [m for m in run if id(m) not in known]
    reloaded = await state.load()
    recorded = {get_message_id(m) for m in reloaded}
    theirs = len(recorded - {get_message_id(m) for m in [*before, *mine]})
    state.history, state.measured = reloaded, False
    note = f"another writer added {theirs} message(s) to session {state.id} meanwhile; reloaded"
    answered = any(isinstance(m, ModelResponse) for m in mine)
    if not retried and not answered and not any(get_message_id(m) in recorded for m in mine):
        state.ui.line(f"↻ {note}: your message is sent again, after theirs.", style="yellow")
        return await run_turn(state, prompt, retried=True)
    # This turn's messages the database does not hold yet, after theirs (its prompt may be recorded before theirs).
    pending = [m for m in mine if get_message_id(m) not in recorded]
    ours = {get_message_id(m) for m in [*before, *mine]}
    rebased = bool(pending) and isinstance(pending[0], ModelResponse) and get_message_id(reloaded[-1]) not in ours
    if rebased:  # the answer would follow their messages as if it answered them: the prompt goes before it again
        pending.insert(0, _restated(prompt, mine))
    state.history = [*reloaded, *pending]
    if not mine:
        state.history.append(ModelRequest(parts=[UserPromptPart(prompt)]))
    try:
        await _record(state, state.history)
    except HistoryStoreError as exc:
        return TurnOutcome("failed", f"{note}; this turn is not saved: {exc}".splitlines()[0])
    last = mine[-1] if mine else None
    if isinstance(last, ModelResponse) and not last.tool_calls:  # the answer was complete: only its record waited
        again = " (your message repeated before the answer)" if rebased else ""
        state.ui.line(f"↻ {note}: this turn is recorded after theirs{again}.", style="yellow")
        return TurnOutcome("done")
    return TurnOutcome("failed", f"{note}: this turn's messages so far are kept after theirs")


def _restated(prompt: str, mine: list[ModelMessage]) -> ModelRequest:
    """The user's prompt again, for the part of a turn recorded after another writer's messages (the first
    recording of the prompt, before theirs, stays where it is: records are never moved)."""
    first = next((m for m in mine if isinstance(m, ModelRequest) and _has_prompt([m], prompt)), None)
    origin = get_message_id(first) if first is not None else None
    return ModelRequest(parts=[UserPromptPart(prompt)], metadata={REBASED_KEY: origin} if origin else None)


async def run_cancellable(work: Awaitable[T]) -> T:
    """Await `work` with Ctrl-C cancelling it (not the program): then `Interrupted` is raised."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    try:
        loop.add_signal_handler(signal.SIGINT, task.cancel)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
        installed = False
    try:
        return await task
    except asyncio.CancelledError:
        if not task.cancelled():
            raise  # the caller itself is cancelled, not the work
        raise Interrupted from None
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)
