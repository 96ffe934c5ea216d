"""The index and the plan of `PatchToolCalls`: one pass finds every call and result, then decides what moves.

What a patch does to each call (a synthetic result, a moved result, duplicates recorded, orphans turned into
notes) is decided here; `_processor.py` assembles the patched history from the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias, TypeGuard, cast

from pydantic_ai.messages import (
    SYNTHESIZED_TOOL_RETURN_METADATA_KEY,
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
)
from pydantic_core import to_json

__all__ = ["INTERRUPTED_RESULT_CONTENT", "PATCH_METADATA_KEY", "PLACEHOLDER_PROMPT"]

PATCH_METADATA_KEY = "pydantic_deep.patch_tool_calls"
"""The key under which `PatchToolCalls` records what it did, in a part's or a request's `metadata`:

- a synthetic result (`ToolReturnPart.metadata`): `{"synthetic": True}`; pydantic-ai's own marker
  `pydantic_ai_synthesized_tool_return: True` is set next to it;
- a kept result that had non-identical duplicates (`ToolReturnPart.metadata`): `{"duplicates": [...]}`, one
  dict per dropped result with its `tool_name`, `tool_call_id`, `outcome`, `content`, `metadata`, `timestamp`;
- a request the patch inserted (`ModelRequest.metadata`): `{"inserted": "tool_results"}` or
  `{"inserted": "placeholder"}`.
"""

INTERRUPTED_RESULT_CONTENT = "Tool call was cancelled or interrupted before it returned a result."
"""The content of the synthetic result given to a call that has no result anywhere in the history."""

PLACEHOLDER_PROMPT = "[No user message was recorded at this point of the conversation.]"
"""The user prompt of a request the patch inserts where the history needs a user turn and has none: before an
assistant message that opens the history, between two assistant messages, after a summary that no user turn
follows, and at the end of a history that ended with a request whose every part was moved away."""

_ToolResult: TypeAlias = "ToolReturnPart | RetryPromptPart"  # pyright: ignore[reportDeprecated]


def is_tool_result(part: object) -> TypeGuard[_ToolResult]:
    """A request part that answers a function tool call (as `validate_history` and pydantic-ai count them)."""
    if isinstance(part, ToolReturnPart):
        return True
    return isinstance(part, RetryPromptPart) and part.tool_name is not None  # pyright: ignore[reportDeprecated]


def _as_dict(value: object) -> dict[str, Any] | None:
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


def _is_synthetic(part: _ToolResult) -> bool:
    """A placeholder written by a repair (pydantic-ai's or ours), not a result the tool produced."""
    if not isinstance(part, ToolReturnPart):
        return False
    metadata = _as_dict(part.metadata)
    if metadata is None:
        return False
    if metadata.get(SYNTHESIZED_TOOL_RETURN_METADATA_KEY):
        return True
    ours = _as_dict(metadata.get(PATCH_METADATA_KEY))
    return ours is not None and bool(ours.get("synthetic"))


def _outcome(part: _ToolResult) -> str:
    return part.outcome if isinstance(part, ToolReturnPart) else "retried"


_OUTCOME_RANK = {"retried": 1, "interrupted": 2}


def _rank(part: _ToolResult) -> int:
    """Which result of a call is kept (lowest first): a final outcome (success, failed, denied), then a retry
    request, then a real interruption, then a synthetic placeholder. Ties go to the earliest."""
    if _is_synthetic(part):
        return 3
    return _OUTCOME_RANK.get(_outcome(part), 0)


def _same_result(a: _ToolResult, b: _ToolResult) -> bool:
    """Exact duplicates: everything equal but the timestamp (a copied or re-delivered message)."""
    if type(a) is not type(b) or a.tool_name != b.tool_name or _outcome(a) != _outcome(b):
        return False
    try:
        same = bool(a.content == b.content)
        if isinstance(a, ToolReturnPart) and isinstance(b, ToolReturnPart):
            same = same and bool(a.metadata == b.metadata)
    except Exception:  # content whose `==` raises or is ambiguous (arrays): not provably the same
        return False
    return same


def _content_text(part: _ToolResult) -> tuple[str, list[UserContent]]:
    """What the model would have read in a result: its text, and its files (images, documents) apart."""
    if isinstance(part, ToolReturnPart):
        files: list[UserContent] = list(part.files)
        try:
            return part.model_response_str(wrap_if_error=False), files
        except Exception:  # content pydantic cannot serialize: its repr still carries the information
            return repr(part.content), files
    content = part.content
    return (content if isinstance(content, str) else to_json(content, fallback=repr).decode()), []


def _note(part: _ToolResult, why: str) -> UserPromptPart:
    """A result turned into user-voice text, so its content reaches the model where a result can't stand."""
    header = f"[{why}: tool {part.tool_name!r}, call {part.tool_call_id!r}, outcome {_outcome(part)!r}]"
    text, files = _content_text(part)
    body = f"{header}\n{text}" if text else header
    return UserPromptPart([body, *files] if files else body, timestamp=part.timestamp)


def _dropped_record(part: _ToolResult) -> dict[str, Any]:
    return {
        "tool_name": part.tool_name,
        "tool_call_id": part.tool_call_id,
        "outcome": _outcome(part),
        "content": part.content,
        "metadata": part.metadata if isinstance(part, ToolReturnPart) else None,
        "timestamp": part.timestamp,
    }


def _with_duplicates(part: _ToolResult, dropped: list[_ToolResult]) -> ToolReturnPart | None:
    """`part` with the dropped duplicates recorded in its metadata, or `None` if it can't carry metadata."""
    if not isinstance(part, ToolReturnPart):
        return None
    metadata = {} if part.metadata is None else _as_dict(part.metadata)
    if metadata is None:
        return None
    new_metadata = dict(metadata)
    record = dict(_as_dict(new_metadata.get(PATCH_METADATA_KEY)) or {})
    previous: object = record.get("duplicates")
    earlier = list(cast("list[Any]", previous)) if isinstance(previous, list) else []
    record["duplicates"] = [*earlier, *(_dropped_record(d) for d in dropped)]
    new_metadata[PATCH_METADATA_KEY] = record
    return replace(part, metadata=new_metadata)


def _synthetic_result(call: ToolCallPart, response: ModelResponse) -> ToolReturnPart:
    # Deterministic (the response's timestamp, no random data): patching the same history twice gives the same
    # parts, so a provider's prompt cache is not churned.
    return ToolReturnPart(
        call.tool_name,
        INTERRUPTED_RESULT_CONTENT,
        call.tool_call_id,
        tool_kind=call.tool_kind,
        metadata={SYNTHESIZED_TOOL_RETURN_METADATA_KEY: True, PATCH_METADATA_KEY: {"synthetic": True}},
        timestamp=response.timestamp,
        outcome="interrupted",
    )


def inserted_request(parts: list[ModelRequestPart], what: str) -> ModelRequest:
    return ModelRequest(parts=parts, metadata={PATCH_METADATA_KEY: {"inserted": what}})


def placeholder_request() -> ModelRequest:
    return inserted_request([UserPromptPart(PLACEHOLDER_PROMPT)], "placeholder")


def has_user_voice(message: ModelRequest) -> bool:
    """Anything but system prompts and summaries: a user turn, a tool result (as `validate_history` counts)."""
    return any(not isinstance(p, SystemPromptPart | CompactionPart) for p in message.parts)


@dataclass
class _Result:
    message: int
    index: int
    part: _ToolResult
    run_of: int
    """The response whose run of requests holds this result (-1 before the first response)."""
    in_place: bool = False
    """In the request right after `run_of`, before any user text there: where strict providers want it."""


@dataclass
class CallIndex:
    """One pass over the history: every call occurrence and every result, with where it stands."""

    calls: dict[int, dict[str, ToolCallPart]] = field(default_factory=dict[int, dict[str, ToolCallPart]])
    """For each response index, its function tool calls by id (a repeated id in one response counts once)."""
    occurrences: dict[str, list[int]] = field(default_factory=dict[str, list[int]])
    """For each call id, the responses that call it, in order (providers may reuse ids across responses)."""
    owned: dict[tuple[int, str], list[_Result]] = field(default_factory=dict[tuple[int, str], list[_Result]])
    """The results of each (response, call id): a result answers the latest call with its id before it, or
    the first one after it when it comes before every call with its id."""
    orphans: list[_Result] = field(default_factory=list[_Result])
    """Results whose call is nowhere in the history."""

    @classmethod
    def build(cls, messages: Sequence[ModelMessage]) -> CallIndex:
        index = cls()
        early: list[_Result] = []
        last_response = -1
        for i, message in enumerate(messages):
            if isinstance(message, ModelResponse):
                last_response = i
                calls: dict[str, ToolCallPart] = {}
                for part in message.parts:
                    if isinstance(part, ToolCallPart) and part.tool_call_id not in calls:
                        calls[part.tool_call_id] = part
                        index.occurrences.setdefault(part.tool_call_id, []).append(i)
                if calls:
                    index.calls[i] = calls
                continue
            text_before = False
            for j, part in enumerate(message.parts):
                if not is_tool_result(part):
                    text_before = text_before or not isinstance(part, SystemPromptPart)
                    continue
                result = _Result(i, j, part, last_response, i == last_response + 1 and not text_before)
                seen = index.occurrences.get(result.part.tool_call_id)
                if seen:
                    index.owned.setdefault((seen[-1], result.part.tool_call_id), []).append(result)
                else:
                    early.append(result)
        for result in early:  # before every call with its id: it belongs to the first one, if there is any
            seen = index.occurrences.get(result.part.tool_call_id)
            if seen:
                index.owned.setdefault((seen[0], result.part.tool_call_id), []).append(result)
            else:
                index.orphans.append(result)
        return index


@dataclass
class Plan:
    """The edits: parts removed or replaced in place, and the results each response must receive."""

    remove: set[tuple[int, int]] = field(default_factory=set[tuple[int, int]])
    replace: dict[tuple[int, int], ModelRequestPart] = field(default_factory=dict[tuple[int, int], ModelRequestPart])
    incoming: dict[int, list[ModelRequestPart]] = field(default_factory=dict[int, list[ModelRequestPart]])
    touched: set[int] = field(default_factory=set[int])


def make_plan(messages: Sequence[ModelMessage], index: CallIndex, close_last_response: bool) -> Plan:
    plan = Plan()
    last = len(messages) - 1
    for response_at, calls in index.calls.items():
        for call_id, call in calls.items():
            results = index.owned.get((response_at, call_id))
            if not results:
                if response_at != last or close_last_response:
                    response = messages[response_at]
                    assert isinstance(response, ModelResponse)
                    plan.incoming.setdefault(response_at, []).append(_synthetic_result(call, response))
                continue
            kept = min(results, key=lambda r: (_rank(r.part), r.message, r.index))
            kept_part: ModelRequestPart = kept.part
            recorded: list[_ToolResult] = []
            for other in results:
                if other is kept:
                    continue
                plan.remove.add((other.message, other.index))
                plan.touched.add(other.message)
                if _is_synthetic(other.part) or _same_result(other.part, kept.part):
                    continue  # a placeholder or an exact copy: nothing is lost
                recorded.append(other.part)
            if recorded:
                with_record = _with_duplicates(kept.part, recorded)
                if with_record is not None:
                    kept_part = with_record
                else:  # a legacy retry prompt (or non-dict metadata) can't carry them: keep them as notes
                    for other in results:
                        if any(other.part is r for r in recorded):
                            key = (other.message, other.index)
                            plan.remove.discard(key)
                            plan.replace[key] = _note(other.part, "Duplicate tool result, already answered")
            if kept.run_of == response_at and kept.in_place:  # already in the request right after its call
                if kept_part is not kept.part:
                    plan.replace[(kept.message, kept.index)] = kept_part
                    plan.touched.add(kept.message)
            else:  # late (or early): moved next to its call, never replaced
                plan.remove.add((kept.message, kept.index))
                plan.touched.add(kept.message)
                plan.incoming.setdefault(response_at, []).append(kept_part)
    for orphan in index.orphans:
        plan.replace[(orphan.message, orphan.index)] = _note(orphan.part, "Orphaned tool result, its call is missing")
        plan.touched.add(orphan.message)
    return plan
