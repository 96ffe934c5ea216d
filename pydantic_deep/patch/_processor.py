"""`PatchToolCalls`: make a broken history provider-valid without losing a tool result.

A history loaded from disk, written by another framework, or cut by hand can hold tool calls with no result,
results far from their call (or before it), duplicated results, and results whose call is gone. pydantic-ai
repairs dangling calls itself before each request, but it *drops* a result whose call is not right before it,
which can make the model call the tool again and loop. This processor runs first and moves instead.

Everything is decided from one index pass over the history (O(number of parts)); a second pass assembles the
output only where something changes, reusing every untouched message object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias, TypeGuard, cast

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
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
from pydantic_ai.models import ModelRequestContext
from pydantic_core import to_json

from summarization_pydantic_ai import is_summary_message

__all__ = [
    "INTERRUPTED_RESULT_CONTENT",
    "PATCH_METADATA_KEY",
    "PLACEHOLDER_PROMPT",
    "PatchToolCalls",
]

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


def _is_tool_result(part: object) -> TypeGuard[_ToolResult]:
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


def _inserted_request(parts: list[ModelRequestPart], what: str) -> ModelRequest:
    return ModelRequest(parts=parts, metadata={PATCH_METADATA_KEY: {"inserted": what}})


def _placeholder_request() -> ModelRequest:
    return _inserted_request([UserPromptPart(PLACEHOLDER_PROMPT)], "placeholder")


def _has_user_voice(message: ModelRequest) -> bool:
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
class _Index:
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
    def build(cls, messages: Sequence[ModelMessage]) -> _Index:
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
                if not _is_tool_result(part):
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
class _Plan:
    """The edits: parts removed or replaced in place, and the results each response must receive."""

    remove: set[tuple[int, int]] = field(default_factory=set[tuple[int, int]])
    replace: dict[tuple[int, int], ModelRequestPart] = field(default_factory=dict[tuple[int, int], ModelRequestPart])
    incoming: dict[int, list[ModelRequestPart]] = field(default_factory=dict[int, list[ModelRequestPart]])
    touched: set[int] = field(default_factory=set[int])


def _plan(messages: Sequence[ModelMessage], index: _Index, close_last_response: bool) -> _Plan:
    plan = _Plan()
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


def _assemble(messages: Sequence[ModelMessage], plan: _Plan) -> tuple[list[ModelMessage], bool]:
    out: list[ModelMessage] = []
    changed = False
    n = len(messages)
    for i, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            if out and isinstance(out[-1], ModelResponse):
                out.append(_placeholder_request())
                changed = True
            out.append(message)
            incoming = plan.incoming.get(i)
            if incoming and not (i + 1 < n and isinstance(messages[i + 1], ModelRequest)):
                out.append(_inserted_request(incoming, "tool_results"))
                changed = True
            continue
        incoming = plan.incoming.get(i - 1) if i > 0 and isinstance(messages[i - 1], ModelResponse) else None
        if i not in plan.touched and not incoming:
            if message.parts:
                out.append(message)
            else:
                changed = True  # an empty request: nothing to send
            continue
        parts: list[ModelRequestPart] = []
        insert_at = 0
        for j, part in enumerate(message.parts):
            if (i, j) in plan.remove:
                continue
            new_part = plan.replace.get((i, j), part)
            parts.append(new_part)
            if _is_tool_result(new_part):
                insert_at = len(parts)
        if incoming:
            parts[insert_at:insert_at] = incoming  # after the results already there, before the user's text
        if i > 0 and isinstance(messages[i - 1], ModelResponse):
            # Results first (a note that replaced an orphan must not stand before a real result).
            parts = [p for p in parts if _is_tool_result(p)] + [p for p in parts if not _is_tool_result(p)]
        changed = True
        if parts:
            out.append(replace(message, parts=parts))
    return out, changed


def _fix_turns(out: list[ModelMessage], ended_with_request: bool) -> bool:
    """Give the history the user turns a provider needs; returns whether it inserted any."""
    changed = False
    if ended_with_request and (not out or isinstance(out[-1], ModelResponse)):
        out.append(_placeholder_request())
        changed = True
    first_response = next((k for k, m in enumerate(out) if isinstance(m, ModelResponse)), None)
    if first_response is not None and not any(
        isinstance(m, ModelRequest) and (_has_user_voice(m) or is_summary_message(m)) for m in out[:first_response]
    ):
        out.insert(first_response, _placeholder_request())
        changed = True
    last_summary = None
    for k, m in enumerate(out):
        if isinstance(m, ModelRequest):
            if _has_user_voice(m):
                return changed
            if is_summary_message(m):
                last_summary = k
    if last_summary is not None:  # summaries but no user turn anywhere
        out.insert(last_summary + 1, _placeholder_request())
        changed = True
    return changed


def _needs_patch(messages: Sequence[ModelMessage], close_last_response: bool) -> bool:
    """Whether any rule applies, checked without building the index (the common case, on every request).

    Allocates nothing per message: a history of 10,000 messages is checked in a few milliseconds, and a
    patched history is never checked twice by the full pass. Must flag everything `_plan` / `_fix_turns`
    would change (the full pass then returns the input itself when it finds nothing after all).
    """
    call_at: dict[str, int] = {}  # call id -> the latest response calling it
    answered_at: dict[str, int] = {}  # call id -> the response whose call it answered last
    last_response = -1
    calls = answered = 0
    before_first_response_ok = False
    user_voice = False
    previous_is_response = False
    for i, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            if previous_is_response or answered != calls:
                return True
            if last_response == -1 and not before_first_response_ok:
                return True  # the history opens with an assistant message
            previous_is_response = True
            last_response = i
            calls = answered = 0
            for part in message.parts:
                if isinstance(part, ToolCallPart) and call_at.get(part.tool_call_id) != i:
                    call_at[part.tool_call_id] = i
                    calls += 1
            continue
        first_after_response = previous_is_response
        previous_is_response = False
        if not message.parts:
            return True
        if _has_user_voice(message):
            user_voice = True
            before_first_response_ok = True
        elif last_response == -1 and not before_first_response_ok:
            before_first_response_ok = is_summary_message(message)
        text_before = False
        for part in message.parts:
            if _is_tool_result(part):
                call_id = part.tool_call_id
                if call_at.get(call_id) != last_response or answered_at.get(call_id) == last_response:
                    return True  # orphaned, early, late or duplicated
                if not first_after_response or text_before:
                    return True  # in a later request of the run, or after user text: strict providers refuse it
                answered_at[call_id] = last_response
                answered += 1
            else:
                text_before = text_before or not isinstance(part, SystemPromptPart)
    if answered != calls and (last_response != len(messages) - 1 or close_last_response):
        return True
    # summaries but no user turn
    return not user_voice and any(isinstance(m, ModelRequest) and is_summary_message(m) for m in messages)


def patch_tool_calls(messages: Sequence[ModelMessage], *, close_last_response: bool = True) -> list[ModelMessage]:
    """The patch `PatchToolCalls` applies (see its docstring); returns `messages` itself when nothing changes."""
    if not messages or not _needs_patch(messages, close_last_response):
        return messages if isinstance(messages, list) else list(messages)
    index = _Index.build(messages)
    plan = _plan(messages, index, close_last_response)
    out, changed = _assemble(messages, plan)
    changed = _fix_turns(out, isinstance(messages[-1], ModelRequest)) or changed
    if changed:
        return out
    return messages if isinstance(messages, list) else list(messages)


@dataclass
class PatchToolCalls(AbstractCapability[Any]):
    """Pair every tool call with exactly one result, across the whole history, without losing a result.

    Usable three ways: `PatchToolCalls()(messages)` (synchronous, on a history loaded from disk or from another
    framework), `Agent(capabilities=[PatchToolCalls()])` (before each model request, the patched history is
    also written back to the run's history), or `ProcessHistory(PatchToolCalls())`.

    Rules (calls and results are paired by `tool_call_id`; a result is a `ToolReturnPart` of any outcome or a
    legacy `RetryPromptPart` naming a tool):

    - A call with no result anywhere gets a synthetic `ToolReturnPart(outcome='interrupted')` with
      `INTERRUPTED_RESULT_CONTENT`, marked in `metadata` (see `PATCH_METADATA_KEY`), in the request right
      after its response (a new request if a response follows, or if the history ends with the call).
    - A real result found later (or earlier) than the requests right after its call is moved there,
      unchanged; it is never replaced by a synthetic one.
    - A call with several results keeps one: a final outcome (success, failed, denied) over a retry request
      over a real interruption over a synthetic placeholder, the earliest on a tie. Exact copies and
      synthetic placeholders are dropped; any other dropped result is recorded in the kept result's
      `metadata[PATCH_METADATA_KEY]["duplicates"]` (or, if the kept result is a legacy `RetryPromptPart`
      that has no metadata, left in place as a user-voice note).
    - A result whose call is nowhere in the history becomes a `UserPromptPart` note in the same request
      ("[Orphaned tool result ...]" and its content, files included), so its content survives.
    - Empty requests are dropped. A request holding `PLACEHOLDER_PROMPT` is inserted where the history would
      otherwise open with an assistant message, hold two assistant messages in a row, hold summaries but no
      user turn, or end with an assistant message although it ended with a request.

    Messages are never changed in place; untouched messages are reused as they are, and the input list itself
    is returned when nothing needed a patch. The output passes
    `validate_history(out, for_request=isinstance(out[-1], ModelRequest))`. One index pass: O(parts).
    """

    def __call__(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        return patch_tool_calls(messages)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        messages = request_context.messages
        # A history that ends with a response here is a suspended turn being resumed: its calls are still live.
        result = patch_tool_calls(
            messages, close_last_response=bool(messages) and isinstance(messages[-1], ModelRequest)
        )
        if result is not messages:
            ctx.messages[:] = result
            request_context.messages = list(result)
        return request_context
