"""A summarizer that asks a model: the run's own (cache-aligned), or another one that reads the span in chunks."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic_ai.direct import model_request
from pydantic_ai.messages import ModelMessage, ModelRequest, TextPart, UserPromptPart

from .._render import render_message
from .._tokens import CHARS_PER_TOKEN
from .._windows import DEFAULT_MAX_TOKENS
from ..cost._records import report_summarizer_usage
from ._aligned import aligned_summary, fits_aligned
from ._latest import summary_latest
from ._models import RUN_MODEL, ModelUnavailable, check_model_name, model_window
from ._protocol import SummarizerError, SummaryRequest
from ._template import DEFAULT_SUMMARY_PROMPT, SUMMARIZER_INSTRUCTIONS, fill_template, validate_template

__all__ = ["LLMSummarizer"]

logger = logging.getLogger("summarization_pydantic_ai")

_MIN_INPUT_TOKENS = 1_000


def chunk_rendered(rendered: Sequence[str], max_chars: int) -> list[str]:
    """Group rendered messages into chunks of at most `max_chars` (a message never straddles two chunks)."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for text in rendered:
        if current and size + len(text) + 1 > max_chars:
            chunks.append("\n".join(current))
            current, size = [], 0
        current.append(text)
        size += len(text) + 1
    if current:
        chunks.append("\n".join(current))
    return chunks


@dataclass
class LLMSummarizer:
    """Summarizes with a model.

    With `RUN_MODEL` (or the run's own `Model` instance) inside a run, the summary request is the run's request
    itself — same instructions, tool definitions and messages — with the summary instruction appended, so a
    provider with prefix caching reads the conversation from its cache; when that request would not fit the
    model's window, the span is read in chunks as below.

    Any other model gets the span rendered as text through a small internal agent. When the rendering exceeds
    the input budget (the summary model's window minus `reserve_tokens`), it is split at message boundaries and
    summarized chunk by chunk, each step refining the summary so far (a rolling summary), so the oldest message
    is read as surely as the newest. A single message larger than a chunk keeps its head and tail with a marker.

    Raises [`SummarizerError`][summarization_pydantic_ai.SummarizerError] on a model error, a timeout or an
    empty answer; the processors then ask once more, then use the deterministic summarizer. A model name is
    checked at construction: an unknown provider raises `ValueError` (a missing API key does not).

    Example:
        ```python
        summarizer = LLMSummarizer('openai:gpt-4.1-mini', timeout=60)
        ```
    """

    model: Any
    """`RUN_MODEL`, a model name (`'openai:gpt-4.1-mini'`) or a pydantic-ai `Model` (e.g. `FunctionModel`)."""
    prompt_template: str = DEFAULT_SUMMARY_PROMPT
    instructions: str = SUMMARIZER_INSTRUCTIONS
    max_input_tokens: int | None = None
    """Input budget per call; default: the summary model's context window minus `reserve_tokens` (the window
    unknown: the agent's budget, else 200,000)."""
    timeout: float | None = 120.0
    """Seconds per model call."""
    max_summary_tokens: int | None = None
    """A summary estimated longer than this is refused and the deterministic summary used instead. Whatever this
    is, a summary longer than the messages it replaces is always refused."""
    model_settings: Any = None
    reserve_tokens: int = 8_000
    """Room kept in every call for the instructions and the answer (the previous summary is counted apart)."""
    name: str = "llm"
    _models: dict[int, tuple[Any, Any]] = field(default_factory=dict[int, tuple[Any, Any]], init=False, repr=False)
    """The model instance of the latest model asked (a name is resolved once), by the identity of what was given."""
    _rendered: tuple[Any, int, list[str]] | None = field(default=None, init=False, repr=False)
    """The latest span rendered (span, part size, lines): a second attempt at the same summary reuses it."""

    def __post_init__(self) -> None:
        validate_template(self.prompt_template)
        if isinstance(self.model, str):
            check_model_name(self.model)
        if self.max_input_tokens is not None and self.max_input_tokens < _MIN_INPUT_TOKENS:
            raise ValueError(f"max_input_tokens must be at least 1,000, got {self.max_input_tokens}")
        if self.max_summary_tokens is not None and self.max_summary_tokens < 1:
            raise ValueError(f"max_summary_tokens must be at least 1, got {self.max_summary_tokens}")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")
        if self.reserve_tokens < 0:
            raise ValueError(f"reserve_tokens must be >= 0, got {self.reserve_tokens}")

    @property
    def model_name(self) -> str | None:
        if self.model is RUN_MODEL:
            return None
        if isinstance(self.model, str):
            return self.model
        return getattr(self.model, "model_name", None)

    def input_budget_tokens(self, request: SummaryRequest | None = None) -> int:
        """Tokens of conversation one call may carry."""
        if self.max_input_tokens is not None:
            return self.max_input_tokens
        window = self.window_tokens(request)
        return max(window - self.reserve_tokens, _MIN_INPUT_TOKENS)

    def window_tokens(self, request: SummaryRequest | None = None) -> int:
        """The summary model's window; unknown (e.g. `FunctionModel`): the agent's budget, else 200,000."""
        model = self.model
        if model is RUN_MODEL and request is not None and request.live is not None:
            model = request.live.model
        window = model_window(model)
        if window is None and request is not None:
            window = request.window_tokens
        return window or DEFAULT_MAX_TOKENS

    async def summarize(self, request: SummaryRequest) -> str:
        model = self._model_for(request)
        if fits_aligned(self, model, request):
            return await aligned_summary(self, model, request)
        return await self._chunked(model, request)

    def _model_for(self, request: SummaryRequest) -> Any:
        if self.model is not RUN_MODEL:
            return self.model
        if request.live is None or request.live.model is None:
            raise ModelUnavailable("no run model to summarize with: the compaction ran outside an agent run")
        return request.live.model

    async def _chunked(self, model: Any, request: SummaryRequest) -> str:
        budget_chars = self.input_budget_tokens(request) * CHARS_PER_TOKEN
        latest = summary_latest(request)
        fixed = len(self.prompt_template) + len(latest) + len(request.focus or "") + 200
        # Room for the messages once the template, the request and a previous summary of modest size are in.
        room = max(budget_chars - fixed - min(len(request.previous_summary or ""), budget_chars // 4), 2_000)
        rendered = self._render(request, room)
        summary = request.previous_summary
        for chunk in chunk_rendered(rendered, room):
            summary = await self._call(model, chunk, summary, request.focus, latest)
        if summary is None:
            raise SummarizerError("nothing to summarize")
        return summary

    def _render(self, request: SummaryRequest, room: int) -> list[str]:
        cached = self._rendered
        if cached is not None and cached[0] is request.messages and cached[1] == room:
            return cached[2]
        rendered = _render_span(request.messages, request.first_index, max_part_chars=room)
        self._rendered = (request.messages, room, rendered)
        return rendered

    async def _call(self, model: Any, messages_text: str, previous: str | None, focus: str | None, latest: str) -> str:
        prompt = fill_template(
            self.prompt_template,
            {
                "messages": messages_text,
                "previous_summary": previous or "none",
                "focus": f"Focus especially on: {focus}\n" if focus else "",
                "latest_user_request": latest or "none",
            },
        )
        # One direct request (pydantic-ai's `model_request`): an agent run per chunk cost ~6 ms of CPU each, most
        # of a 14-chunk compaction's own time, for nothing a text summary uses (no tools, no output validation).
        request = ModelRequest(parts=[UserPromptPart(prompt)], instructions=self.instructions)
        instance = self._model_instance(model)
        try:
            with anyio.fail_after(self.timeout):
                response = await model_request(instance, [request], model_settings=self.model_settings)
        except TimeoutError as exc:
            raise SummarizerError(f"summary model timed out after {self.timeout}s") from exc
        except Exception as exc:
            raise SummarizerError(f"summary model failed: {type(exc).__name__}: {exc}") from exc
        report_summarizer_usage(response.usage, response.model_name, response.provider_name)
        text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
        if not text.strip():
            raise SummarizerError("summary model returned empty text")
        return text.strip()

    def _model_instance(self, model: Any) -> Any:
        cached = self._models.get(id(model))
        if cached is not None and cached[0] is model:
            return cached[1]
        from pydantic_ai.models import infer_model

        try:
            instance = infer_model(model)
        except Exception as exc:  # e.g. a missing API key or provider package
            raise ModelUnavailable(f"cannot create the summary model {model!r}: {exc}") from exc
        self._models.clear()  # one model at a time (the run's model rarely changes)
        self._models[id(model)] = (model, instance)
        return instance


def _render_span(messages: Sequence[ModelMessage], first_index: int, *, max_part_chars: int) -> list[str]:
    return [render_message(m, index=first_index + i, max_part_chars=max_part_chars) for i, m in enumerate(messages)]
