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
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    SystemPromptPart,
    ToolCallPart,
)
from pydantic_ai.models import ModelRequestContext

from summarization_pydantic_ai import is_summary_message

from ._plan import (
    INTERRUPTED_RESULT_CONTENT,
    PATCH_METADATA_KEY,
    PLACEHOLDER_PROMPT,
    CallIndex,
    Plan,
    has_user_voice,
    inserted_request,
    is_tool_result,
    make_plan,
    placeholder_request,
)

__all__ = [
    "INTERRUPTED_RESULT_CONTENT",
    "PATCH_METADATA_KEY",
    "PLACEHOLDER_PROMPT",
    "PatchToolCalls",
]


def _assemble(messages: Sequence[ModelMessage], plan: Plan) -> tuple[list[ModelMessage], bool]:
    out: list[ModelMessage] = []
    changed = False
    n = len(messages)
    for i, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            if out and isinstance(out[-1], ModelResponse):
                out.append(placeholder_request())
                changed = True
            out.append(message)
            incoming = plan.incoming.get(i)
            if incoming and not (i + 1 < n and isinstance(messages[i + 1], ModelRequest)):
                out.append(inserted_request(incoming, "tool_results"))
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
            if is_tool_result(new_part):
                insert_at = len(parts)
        if incoming:
            parts[insert_at:insert_at] = incoming  # after the results already there, before the user's text
        if i > 0 and isinstance(messages[i - 1], ModelResponse):
            # Results first (a note that replaced an orphan must not stand before a real result).
            parts = [p for p in parts if is_tool_result(p)] + [p for p in parts if not is_tool_result(p)]
        changed = True
        if parts:
            out.append(replace(message, parts=parts))
    return out, changed


def _fix_turns(out: list[ModelMessage], ended_with_request: bool) -> bool:
    """Give the history the user turns a provider needs; returns whether it inserted any."""
    changed = False
    if ended_with_request and (not out or isinstance(out[-1], ModelResponse)):
        out.append(placeholder_request())
        changed = True
    first_response = next((k for k, m in enumerate(out) if isinstance(m, ModelResponse)), None)
    if first_response is not None and not any(
        isinstance(m, ModelRequest) and (has_user_voice(m) or is_summary_message(m)) for m in out[:first_response]
    ):
        out.insert(first_response, placeholder_request())
        changed = True
    last_summary = None
    for k, m in enumerate(out):
        if isinstance(m, ModelRequest):
            if has_user_voice(m):
                return changed
            if is_summary_message(m):
                last_summary = k
    if last_summary is not None:  # summaries but no user turn anywhere
        out.insert(last_summary + 1, placeholder_request())
        changed = True
    return changed


def _needs_patch(messages: Sequence[ModelMessage], close_last_response: bool) -> bool:
    """Whether any rule applies, checked without building the index (the common case, on every request).

    Allocates nothing per message: a history of 10,000 messages is checked in a few milliseconds, and a
    patched history is never checked twice by the full pass. Must flag everything `make_plan` / `_fix_turns`
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
        if has_user_voice(message):
            user_voice = True
            before_first_response_ok = True
        elif last_response == -1 and not before_first_response_ok:
            before_first_response_ok = is_summary_message(message)
        text_before = False
        for part in message.parts:
            if is_tool_result(part):
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
    index = CallIndex.build(messages)
    plan = make_plan(messages, index, close_last_response)
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
