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
)

from .._messages import SUMMARY_METADATA_KEY, get_message_id, summary_info

__all__ = ["CHECKPOINT_KIND", "CompletedPhase", "Rebuild", "plan_rebuild"]

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


def previous_phases(messages: Sequence[ModelMessage]) -> tuple[list[CompletedPhase], int | None]:
    """The phases recorded by a checkpoint at the start of `messages`, and how many of its parts are the original
    instructions (`None` when the history does not start with a checkpoint)."""
    info = summary_info(messages[0]) if messages else None
    if not info or info.get("kind") != CHECKPOINT_KIND:
        return [], None
    raw = info.get("phases")
    phases = [p for p in map(CompletedPhase.from_json, raw if isinstance(raw, list) else []) if p is not None]  # pyright: ignore[reportUnknownArgumentType]
    count = info.get("instruction_parts")
    return phases, count if isinstance(count, int) and count >= 0 else 0


def _is_result(part: object) -> bool:
    return isinstance(part, ToolReturnPart) or (isinstance(part, RetryPromptPart) and part.tool_name is not None)  # pyright: ignore[reportDeprecated]


def _tail_start(messages: Sequence[ModelMessage], head_end: int, tool_name: str | None) -> int:
    """Where the current phase starts: the requests after the last response (a new prompt), or the last exchange
    when its results are pending, unless that exchange only called the phase tool (then it is archived too)."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], ModelResponse)), None)
    if last is None or last < head_end:
        return head_end  # no response since the head: what follows it is new input
    trailing = messages[last + 1 :]
    if not any(_is_result(p) for m in trailing for p in m.parts):
        return last + 1
    calls = [p.tool_name for p in messages[last].parts if isinstance(p, ToolCallPart)]
    if calls and all(name == tool_name for name in calls):
        return len(messages)
    return last


def _instruction_parts(head: Sequence[ModelMessage], kept_parts: int | None) -> list[ModelRequestPart]:
    """The original instructions: the parts of the requests before the first response (summaries aside); after a
    checkpoint, the parts it kept as instructions."""
    if kept_parts is not None:
        return list(head[0].parts[:kept_parts]) if isinstance(head[0], ModelRequest) else []
    return [p for m in head if isinstance(m, ModelRequest) for p in m.parts if not isinstance(p, CompactionPart)]


def render_checkpoint(phases: Sequence[CompletedPhase], next_phase: str | None) -> str:
    """The checkpoint text the model reads."""
    done = ", ".join(p.name for p in phases)
    lines = [f"[Checkpoint] Completed phases: {done}. Their messages were archived; this is what they established."]
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
    earlier, kept_parts = previous_phases(messages)
    # The head: a previous checkpoint (its instruction parts are kept), else the requests before the first response.
    head_end = 1 if kept_parts is not None else _first_response(messages)
    tail_start = max(_tail_start(messages, head_end, tool_name), head_end)
    head, archived, tail = messages[:head_end], list(messages[head_end:tail_start]), messages[tail_start:]
    archived_ids = tuple(i for i in map(get_message_id, archived) if i)
    phases = [*earlier, *(_with_archive(p, archived_ids) for p in pending)]
    done = {p.name for p in phases}
    next_phase = next((name for name in declared or () if name not in done), None)
    leading: list[ModelRequest] = []
    rest = list(tail)
    while rest and isinstance(rest[0], ModelRequest):
        leading.append(rest.pop(0))  # type: ignore[arg-type]
    instructions = _instruction_parts(head, kept_parts) if head else []
    replaced = [m for m in (*head, *archived) if get_message_id(m)]
    info: dict[str, Any] = {
        "kind": CHECKPOINT_KIND,
        "covers": [get_message_id(m) for m in replaced if summary_info(m) is None],
        "covered_messages": len(head) + len(archived),
        "replaces_summaries": [get_message_id(m) for m in replaced if summary_info(m) is not None],
        "phases": [p.as_json() for p in phases],
        "instruction_parts": len(instructions),
        "created_at": datetime.now(UTC).isoformat(),
    }
    if archived_ids:
        info["first_id"], info["last_id"] = archived_ids[0], archived_ids[-1]
    part = CompactionPart(content=render_checkpoint(phases, next_phase), metadata={SUMMARY_METADATA_KEY: info})
    last_request = next((m for m in reversed(messages) if isinstance(m, ModelRequest) and m.instructions), None)
    checkpoint = ModelRequest(
        parts=[*instructions, part, *(p for m in leading for p in m.parts)],
        instructions=last_request.instructions if last_request is not None else None,
    )
    return Rebuild([checkpoint, *rest], checkpoint, archived, phases)


def _first_response(messages: Sequence[ModelMessage]) -> int:
    return next((i for i, m in enumerate(messages) if isinstance(m, ModelResponse)), len(messages))


def _with_archive(phase: CompletedPhase, archived_ids: tuple[str, ...]) -> CompletedPhase:
    return CompletedPhase(phase.name, phase.state, phase.objectives, phase.completed_at, archived_ids)
