"""The checkpoint message: the original instructions, the completed phases and their state, in one request.

Pure functions over histories: where the current phase starts, which messages a checkpoint archives, and the
`ModelRequest` that stands for them (a `CompactionPart` whose metadata lists the archived ids, as a summary's
does, so the history store's `load()` resumes from it and `read()` still returns every archived message).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from .._messages import SUMMARY_METADATA_KEY, get_message_id, summary_info

__all__ = ["CHECKPOINT_KIND", "CompletedPhase", "Rebuild", "plan_rebuild", "previous_checkpoint"]

CHECKPOINT_KIND = "phase_checkpoint"
"""`summary_info(message)["kind"]` of a checkpoint message."""


@dataclass(frozen=True)
class CompletedPhase:
    """A phase marked done: its name, the state it left, the objectives it completed, what was archived."""

    name: str
    state: Any = None
    """JSON-compatible: a dict, a list, a string, a number or `None`."""
    objectives: tuple[str, ...] = ()
    completed_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    archived_ids: tuple[str, ...] = ()
    """The stable ids of the messages the checkpoint archived (read them with `PhaseCheckpoints.read_phase`)."""
    checkpoint_id: str | None = None
    """The id of the checkpoint message that completed this phase (`None` while the phase is pending)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "objectives": list(self.objectives),
            "completed_at": self.completed_at,
            "archived_ids": list(self.archived_ids),
            "checkpoint_id": self.checkpoint_id,
        }

    @classmethod
    def from_json(cls, data: Any) -> CompletedPhase | None:
        """A phase recorded in a checkpoint's metadata, or `None` when the record is not one."""
        if not isinstance(data, dict):
            return None
        record = cast(dict[str, Any], data)
        name, objectives, ids = record.get("name"), record.get("objectives", []), record.get("archived_ids", [])
        if not isinstance(name, str) or not isinstance(objectives, list) or not isinstance(ids, list):
            return None
        checkpoint_id = record.get("checkpoint_id")
        return cls(
            name,
            record.get("state"),
            tuple(str(o) for o in cast(list[Any], objectives)),
            str(record.get("completed_at", "")),
            tuple(str(i) for i in cast(list[Any], ids)),
            checkpoint_id if isinstance(checkpoint_id, str) else None,
        )


@dataclass
class Rebuild:
    """What one checkpoint does to a history: the new history, the checkpoint message, and what it archived."""

    result: list[ModelMessage]
    checkpoint: ModelRequest
    archived: list[ModelMessage]
    phases: list[CompletedPhase]
    """Every completed phase, the ones this checkpoint completed last."""


@dataclass
class _Previous:
    """What a checkpoint at the start of a history recorded."""

    phases: list[CompletedPhase] = field(default_factory=list[CompletedPhase])
    instruction_parts: int | None = None
    """How many of its parts are the original instructions (`None`: the history does not start with one)."""
    prelude: str = ""
    """The text of the summaries that stood before the first checkpoint (carried by every later one)."""


def previous_checkpoint(messages: Sequence[ModelMessage]) -> _Previous:
    """What the checkpoint at the start of `messages` recorded (empty when there is none)."""
    info = summary_info(messages[0]) if messages else None
    if not info or info.get("kind") != CHECKPOINT_KIND:
        return _Previous()
    raw = info.get("phases")
    phases = [p for p in map(CompletedPhase.from_json, raw if isinstance(raw, list) else []) if p is not None]  # pyright: ignore[reportUnknownArgumentType]
    count, prelude = info.get("instruction_parts"), info.get("prelude")
    return _Previous(
        phases, count if isinstance(count, int) and count >= 0 else 0, prelude if isinstance(prelude, str) else ""
    )


def _is_result(part: object) -> bool:
    return isinstance(part, ToolReturnPart) or (isinstance(part, RetryPromptPart) and part.tool_name is not None)  # pyright: ignore[reportDeprecated]


def _last_response(messages: Sequence[ModelMessage]) -> int | None:
    return next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], ModelResponse)), None)


def _tail_start(messages: Sequence[ModelMessage], head_end: int, archive_tool_exchange: str | None) -> int:
    """Where the current phase starts: the requests after the last response (a new prompt), or the last exchange
    when its results are pending, unless that exchange only called `archive_tool_exchange` (the phase tool: then
    it is archived with the phase)."""
    last = _last_response(messages)
    if last is None or last < head_end:
        return head_end  # no response since the head: what follows it is new input
    trailing = messages[last + 1 :]
    if not any(_is_result(p) for m in trailing for p in m.parts):
        return last + 1
    calls = [p.tool_name for p in messages[last].parts if isinstance(p, ToolCallPart)]
    if calls and all(name == archive_tool_exchange for name in calls):
        return len(messages)
    return last


def _instruction_parts(head: Sequence[ModelMessage], kept_parts: int | None) -> list[ModelRequestPart]:
    """The original instructions: the parts of the requests before the first response (summaries aside); after a
    checkpoint, the parts it kept as instructions."""
    if kept_parts is not None:
        return list(head[0].parts[:kept_parts]) if isinstance(head[0], ModelRequest) else []
    return [p for m in head if isinstance(m, ModelRequest) for p in m.parts if not isinstance(p, CompactionPart)]


def render_checkpoint(phases: Sequence[CompletedPhase], next_phase: str | None, prelude: str = "") -> str:
    """The checkpoint text the model reads."""
    done = ", ".join(p.name for p in phases)
    lines = [f"[Checkpoint] Completed phases: {done}. Their messages were archived; this is what they established."]
    if prelude:
        lines += ["", "## Before the phases", prelude]
    for number, phase in enumerate(phases, 1):
        lines += ["", f"## Phase {number}: {phase.name} (done)"]
        if phase.objectives:
            lines += ["Objectives completed:", *(f"- {o}" for o in phase.objectives)]
        if phase.state is not None:
            state = phase.state if isinstance(phase.state, str) else json.dumps(phase.state, ensure_ascii=False)
            lines.append(f"State: {state}")
    lines += ["", f"Next phase: {next_phase}." if next_phase else "Continue with the task from this state."]
    return "\n".join(lines)


def plan_rebuild(
    messages: Sequence[ModelMessage],
    pending: Sequence[CompletedPhase],
    *,
    tool_name: str | None,
    declared: Sequence[str] | None,
) -> Rebuild:
    """The history rebuilt as the original instructions + one checkpoint message + the current phase."""
    previous = previous_checkpoint(messages)
    kept = previous.instruction_parts
    # The head: a previous checkpoint (its instruction parts are kept), else the requests before the first response.
    head_end = 1 if kept is not None else _first_response(messages)
    head = messages[:head_end]
    instructions = _instruction_parts(head, kept) if head else []
    carried = _after_checkpoint(head, kept)
    # The phase tool's own exchange is archived only when a user prompt opens the rebuilt history without it.
    with_prompt = any(isinstance(p, UserPromptPart) for p in instructions)
    tail_start = max(_tail_start(messages, head_end, tool_name if with_prompt else None), head_end)
    step = _closing_step(messages, head_end, tail_start, tool_name)
    kept_step = list(messages[step[0] : step[1]]) if step else []
    archived = (
        [*messages[head_end : step[0]], *messages[step[1] : tail_start]]
        if step
        else list(messages[head_end:tail_start])
    )
    tail = messages[tail_start:]
    last = _last_response(messages)
    if carried and last is not None and last >= head_end:
        # The previous checkpoint carried the prompt that opened the phase now done: archived with the phase.
        archived.insert(0, ModelRequest(parts=carried))
        carried = []
    prelude = previous.prelude if kept is not None else _summaries_text(head)
    rest = list(tail)
    while not kept_step and rest and isinstance(request := rest[0], ModelRequest):
        rest.pop(0)  # new input joins the checkpoint request (one user turn); a summary in it ends the old phase
        summaries = [p for p in request.parts if isinstance(p, CompactionPart)]
        carried += [p for p in request.parts if not isinstance(p, CompactionPart)]
        if summaries:
            archived.append(request if len(summaries) == len(request.parts) else ModelRequest(parts=summaries))
    archived_ids = tuple(i for i in map(get_message_id, archived) if i)
    phases = [*previous.phases, *(_with_archive(p, archived_ids) for p in pending)]
    info = _checkpoint_info([*head, *archived], phases, len(instructions), prelude, archived_ids)
    done = {p.name for p in phases}
    next_phase = next((name for name in declared or () if name not in done), None)
    part = CompactionPart(content=render_checkpoint(phases, next_phase, prelude), metadata={SUMMARY_METADATA_KEY: info})
    last_request = next((m for m in reversed(messages) if isinstance(m, ModelRequest) and m.instructions), None)
    checkpoint = ModelRequest(
        parts=[*instructions, part, *carried],
        instructions=last_request.instructions if last_request is not None else None,
    )
    return Rebuild([checkpoint, *kept_step, *rest], checkpoint, archived, phases)


def _closing_step(
    messages: Sequence[ModelMessage], head_end: int, tail_start: int, phase_tool: str | None
) -> tuple[int, int] | None:
    """The step that marked the latest pending phase done, when it did more than that (it ran the tests, say) and
    is no longer the current exchange (a cost policy deferred the checkpoint): its response and results, which
    the checkpoint keeps after itself (`None` otherwise). The phase's outcome is in them."""
    if phase_tool is None:
        return None
    answered = {p.tool_call_id for m in messages[head_end:] for p in m.parts if isinstance(p, ToolReturnPart)}
    for start in range(tail_start - 1, head_end - 1, -1):
        calls = [p for p in messages[start].parts if isinstance(p, ToolCallPart)]
        if any(c.tool_name == phase_tool and c.tool_call_id in answered for c in calls):
            if all(c.tool_name == phase_tool for c in calls):
                return None  # it only closed the phase: archived with it
            end = next((i for i in range(start + 1, tail_start) if isinstance(messages[i], ModelResponse)), None)
            return None if end is None else (start, end)
    return None


def _after_checkpoint(head: Sequence[ModelMessage], kept: int | None) -> list[ModelRequestPart]:
    """The parts a previous checkpoint request holds after its instructions and its checkpoint part."""
    first = head[0] if head else None
    if kept is None or not isinstance(first, ModelRequest):
        return []
    return list(first.parts[kept + 1 :])


def _checkpoint_info(
    replaced: Sequence[ModelMessage],
    phases: Sequence[CompletedPhase],
    instruction_parts: int,
    prelude: str,
    archived_ids: tuple[str, ...],
) -> dict[str, Any]:
    """The checkpoint's provenance: what it replaced (as a summary records it) and the phases so far."""
    with_ids = [m for m in replaced if get_message_id(m)]
    info: dict[str, Any] = {
        "kind": CHECKPOINT_KIND,
        "covers": [get_message_id(m) for m in with_ids if summary_info(m) is None],
        "covered_messages": len(replaced),
        "replaces_summaries": [get_message_id(m) for m in with_ids if summary_info(m) is not None],
        "phases": [p.as_json() for p in phases],
        "instruction_parts": instruction_parts,
        "created_at": datetime.now(UTC).isoformat(),
    }
    if prelude:
        info["prelude"] = prelude
    if archived_ids:
        info["first_id"], info["last_id"] = archived_ids[0], archived_ids[-1]
    return info


def _summaries_text(head: Sequence[ModelMessage]) -> str:
    """The summaries among the first requests (a compaction before the first phase): the checkpoint carries them."""
    texts = [p.content for m in head for p in m.parts if isinstance(p, CompactionPart) and p.content]
    return "\n\n".join(texts)


def _first_response(messages: Sequence[ModelMessage]) -> int:
    return next((i for i, m in enumerate(messages) if isinstance(m, ModelResponse)), len(messages))


def _with_archive(phase: CompletedPhase, archived_ids: tuple[str, ...]) -> CompletedPhase:
    return CompletedPhase(phase.name, phase.state, phase.objectives, phase.completed_at, archived_ids)
