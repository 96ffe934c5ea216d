"""Summarizers: the protocol, the LLM summarizer, the deterministic (no-LLM) summarizer and the prompt template."""

from ._deterministic import DeterministicSummarizer, latest_user_request
from ._llm import LLMSummarizer
from ._protocol import Summarizer, SummarizerError, SummaryRequest
from ._template import DEFAULT_SUMMARY_PROMPT, SUMMARIZER_INSTRUCTIONS, TEMPLATE_PLACEHOLDERS, validate_template

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "SUMMARIZER_INSTRUCTIONS",
    "TEMPLATE_PLACEHOLDERS",
    "DeterministicSummarizer",
    "LLMSummarizer",
    "Summarizer",
    "SummarizerError",
    "SummaryRequest",
    "latest_user_request",
    "validate_template",
]
