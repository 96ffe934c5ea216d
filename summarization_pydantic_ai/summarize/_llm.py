"""A summarizer that asks a model, seeing every message of the span (chunked when it does not fit)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic_ai.messages import ModelMessage

from .._render import render_message
from .._tokens import CHARS_PER_TOKEN
from .._windows import resolve_max_tokens
from ._deterministic import latest_request_from_summary, latest_user_request
from ._protocol import SummarizerError, SummaryRequest
from ._template import DEFAULT_SUMMARY_PROMPT, SUMMARIZER_INSTRUCTIONS, fill_template, validate_template

__all__ = ["LLMSummarizer"]

logger = logging.getLogger("summarization_pydantic_ai")

_DEFAULT_INPUT_BUDGET = 32_000
_MAX_INPUT_BUDGET = 120_000


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
    """Summarizes with a model through a small internal pydantic-ai agent.

    The whole span reaches the model: when its rendering exceeds `max_input_tokens`, it is split at message
    boundaries and summarized chunk by chunk, each step refining the summary so far (a rolling summary), so the
    oldest message is read as surely as the newest. A single message larger than a chunk keeps its head and
    tail with a marker. The previous summary is passed explicitly and updated.

    Raises [`SummarizerError`][summarization_pydantic_ai.SummarizerError] on a model error, a timeout or an
    empty answer; the processors then fall back to the deterministic summarizer.

    Example:
        ```python
        summarizer = LLMSummarizer('openai:gpt-4.1-mini', timeout=60)
        ```
    """

    model: Any
    """A model name (`'openai:gpt-4.1-mini'`) or a pydantic-ai `Model` (e.g. `FunctionModel` in tests)."""
    prompt_template: str = DEFAULT_SUMMARY_PROMPT
    instructions: str = SUMMARIZER_INSTRUCTIONS
    max_input_tokens: int | None = None
    """Input budget per call; default: half the model's context window (at most 120,000), or 32,000 if unknown."""
    timeout: float | None = 120.0
    max_summary_tokens: int | None = None
    """A summary estimated longer than this is refused and the deterministic summary used instead. Whatever this
    is, a summary longer than the messages it replaces is always refused."""
    """Seconds per model call."""
    model_settings: Any = None
    name: str = "llm"
    _agent: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        validate_template(self.prompt_template)
        if self.max_input_tokens is not None and self.max_input_tokens < 1_000:
            raise ValueError(f"max_input_tokens must be at least 1,000, got {self.max_input_tokens}")
        if self.max_summary_tokens is not None and self.max_summary_tokens < 1:
            raise ValueError(f"max_summary_tokens must be at least 1, got {self.max_summary_tokens}")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")

    @property
    def model_name(self) -> str | None:
        if isinstance(self.model, str):
            return self.model
        return getattr(self.model, "model_name", None)

    def input_budget_tokens(self) -> int:
        if self.max_input_tokens is not None:
            return self.max_input_tokens
        window = resolve_max_tokens(self.model) if self.model_name else None
        return min(window // 2, _MAX_INPUT_BUDGET) if window else _DEFAULT_INPUT_BUDGET

    async def summarize(self, request: SummaryRequest) -> str:
        budget_chars = self.input_budget_tokens() * CHARS_PER_TOKEN
        latest = (
            request.latest_user_request
            or latest_user_request(request.messages)
            or latest_request_from_summary(request.previous_summary)
            or ""
        )
        fixed = len(self.prompt_template) + len(latest) + len(request.focus or "") + 200
        # Room for the messages once the template, the request and a previous summary of modest size are in.
        room = max(budget_chars - fixed - min(len(request.previous_summary or ""), budget_chars // 4), 2_000)
        rendered = _render_span(request.messages, request.first_index, max_part_chars=room)
        summary = request.previous_summary
        for chunk in chunk_rendered(rendered, room):
            summary = await self._call(chunk, summary, request.focus, latest)
        if summary is None:
            raise SummarizerError("nothing to summarize")
        return summary

    async def _call(self, messages_text: str, previous: str | None, focus: str | None, latest: str) -> str:
        prompt = fill_template(
            self.prompt_template,
            {
                "messages": messages_text,
                "previous_summary": previous or "none",
                "focus": f"Focus especially on: {focus}\n" if focus else "",
                "latest_user_request": latest or "none",
            },
        )
        agent = self._get_agent()
        try:
            with anyio.fail_after(self.timeout):
                result = await agent.run(prompt, model_settings=self.model_settings)
        except TimeoutError as exc:
            raise SummarizerError(f"summary model timed out after {self.timeout}s") from exc
        except Exception as exc:
            raise SummarizerError(f"summary model failed: {type(exc).__name__}: {exc}") from exc
        text = result.output if isinstance(result.output, str) else ""
        if not text.strip():
            raise SummarizerError("summary model returned empty text")
        return text.strip()

    def _get_agent(self) -> Any:
        if self._agent is None:
            from pydantic_ai import Agent

            try:
                self._agent = Agent(self.model, instructions=self.instructions, output_type=str, name="summarizer")
            except Exception as exc:  # e.g. a missing API key or provider package
                raise SummarizerError(f"cannot create the summary model {self.model!r}: {exc}") from exc
        return self._agent


def _render_span(messages: Sequence[ModelMessage], first_index: int, *, max_part_chars: int) -> list[str]:
    return [render_message(m, index=first_index + i, max_part_chars=max_part_chars) for i, m in enumerate(messages)]
