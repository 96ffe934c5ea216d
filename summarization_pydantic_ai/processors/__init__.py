"""History processors: each is a plain async callable (`ProcessHistory`) and a pydantic-ai capability."""

from ._base import HistoryProcessor, request_overhead_tokens
from ._clear_tool_results import CLEARED_METADATA_KEY, ClearToolResultsProcessor
from ._limit_warner import WARNING_METADATA_KEY, LimitWarnerProcessor, WarnOn
from ._sliding_window import SlidingWindowProcessor
from ._summarization import SummarizationProcessor
from ._summary_plan import make_summarizer

__all__ = [
    "CLEARED_METADATA_KEY",
    "WARNING_METADATA_KEY",
    "ClearToolResultsProcessor",
    "HistoryProcessor",
    "LimitWarnerProcessor",
    "SlidingWindowProcessor",
    "SummarizationProcessor",
    "WarnOn",
    "make_summarizer",
    "request_overhead_tokens",
]
