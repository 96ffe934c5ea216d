"""Summarizers: the protocol, the LLM summarizer, the deterministic (no-LLM) summarizer and the prompt template."""

from ._deterministic import DeterministicSummarizer, latest_user_request
from ._latest import VERBATIM_REQUEST_CHARS
from ._llm import LLMSummarizer
from ._models import RUN_MODEL
from ._protocol import LiveRequest, Summarizer, SummarizerError, SummaryRequest
from ._template import DEFAULT_SUMMARY_PROMPT, SUMMARIZER_INSTRUCTIONS, TEMPLATE_PLACEHOLDERS, validate_template
from ._validate import DEFAULT_REQUIRED_SECTIONS

__all__ = [
    "DEFAULT_REQUIRED_SECTIONS",
    "DEFAULT_SUMMARY_PROMPT",
    "RUN_MODEL",
    "SUMMARIZER_INSTRUCTIONS",
    "TEMPLATE_PLACEHOLDERS",
    "VERBATIM_REQUEST_CHARS",
    "DeterministicSummarizer",
    "LLMSummarizer",
    "LiveRequest",
    "Summarizer",
    "SummarizerError",
    "SummaryRequest",
    "latest_user_request",
    "validate_template",
]
