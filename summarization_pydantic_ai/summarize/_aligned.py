"""The cache-aligned summary request: the run's own request, with the summary instruction appended.

A provider with prefix caching bills a re-read of a prefix it has seen at a fraction of the price. The summary
request therefore sends exactly what the run was about to send — the same messages, instructions and tool
definitions (the request's `ModelRequestParameters`) and model settings — and adds one user request at the end.
The messages are prepared as pydantic-ai prepares a run's request before the provider sees it (consecutive requests
merged, tool results in the order of their calls): the stored order would differ from what the provider was last
sent at the first result stored out of order, and the whole conversation after it would be written again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

import anyio
from pydantic_ai.messages import ModelMessage, ModelRequest, TextPart, UserPromptPart, repair_messages
from pydantic_ai.models import Model

from .._tokens import count_tokens_approximately, estimate_text_tokens
from ..cost._records import report_summarizer_usage
from ._latest import summary_latest
from ._models import RUN_MODEL, model_window
from ._protocol import SummarizerError, SummaryRequest
from ._template import ALIGNED_SUMMARY_PROMPT, DEFAULT_SUMMARY_PROMPT, fill_template

__all__ = ["AlignedSummarizer", "aligned_instruction", "aligned_summary", "fits_aligned"]


class AlignedSummarizer(Protocol):
    """What the aligned request uses of the summarizer (`LLMSummarizer`)."""

    @property
    def model(self) -> Any: ...
    @property
    def prompt_template(self) -> str: ...
    @property
    def reserve_tokens(self) -> int: ...
    @property
    def timeout(self) -> float | None: ...


def aligned_instruction(template: str, request: SummaryRequest) -> str:
    """The summary instruction that follows the run's own messages."""
    kept = request.kept_messages
    replaced = (
        f"everything above except the last {kept} message(s), which stay verbatim after it"
        if kept
        else "everything above"
    )
    latest = summary_latest(request)
    values = {
        "messages": replaced,
        "previous_summary": "(any earlier summary is in the conversation above: carry it forward)",
        "focus": f"Focus especially on: {request.focus}\n" if request.focus else "",
        "latest_user_request": latest,
    }
    # A custom prompt still gets the conversation through the cache: its {messages} names what is replaced.
    return fill_template(ALIGNED_SUMMARY_PROMPT if template == DEFAULT_SUMMARY_PROMPT else template, values)


def fits_aligned(summarizer: AlignedSummarizer, model: Any, request: SummaryRequest) -> bool:
    """Whether the summary can reuse the run's request: the summarizer is the run's model, the request is known
    whole, and it fits the model's window with the instruction and the answer (`reserve_tokens`). A model whose
    window is unknown (a `FunctionModel`) was about to receive the request anyway: it is assumed to fit."""
    live = request.live
    if live is None or live.messages is None or live.model_request_parameters is None:
        return False
    if not (summarizer.model is RUN_MODEL or model is live.model):
        return False
    window = model_window(model)
    if window is None:
        return True
    tokens = live.tokens if live.tokens is not None else count_tokens_approximately(live.messages)
    instruction = estimate_text_tokens(aligned_instruction(summarizer.prompt_template, request))
    return tokens + instruction + summarizer.reserve_tokens <= window


async def aligned_summary(summarizer: AlignedSummarizer, model: Any, request: SummaryRequest) -> str:
    """Ask the run's model for the summary with the run's own request as the prefix."""
    live = request.live
    assert live is not None and live.messages is not None
    params = live.model_request_parameters
    if not params.allow_text_output:
        # A run with a structured output type forbids plain text; the summary is text. Tools, instructions and
        # messages (the cached prefix) stay the same.
        params = replace(params, allow_text_output=True)
    instruction = aligned_instruction(summarizer.prompt_template, request)
    messages = [*as_sent(model, live.messages, params), ModelRequest(parts=[UserPromptPart(instruction)])]
    try:
        with anyio.fail_after(summarizer.timeout):
            response = await model.request(messages, live.model_settings, params)
    except TimeoutError as exc:
        raise SummarizerError(f"summary model timed out after {summarizer.timeout}s") from exc
    except Exception as exc:
        raise SummarizerError(f"summary model failed: {type(exc).__name__}: {exc}") from exc
    report_summarizer_usage(response.usage, response.model_name, response.provider_name)
    text = "".join(p.content for p in response.parts if isinstance(p, TextPart)).strip()
    if not text:
        raise SummarizerError("the summary model answered without text (a tool call?)")
    return text


def as_sent(model: Any, messages: Sequence[ModelMessage], params: Any) -> list[ModelMessage]:
    """`messages` as pydantic-ai hands a run's request to `model` (its graph repairs and merges the history, the
    model prepares it, e.g. tool results in call order, and the graph merges again): a direct `model.request`
    gets none of that."""
    cleaned = repair_messages(messages)
    if not isinstance(model, Model):
        return cleaned
    return repair_messages(model.prepare_messages(cleaned, params))
