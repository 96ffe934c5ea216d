"""summarization_pydantic_ai: the context engine for pydantic-ai agents.

Token accounting, context windows, pair-safe cutoffs, summaries, sliding windows and tool-result clearing,
each usable as a plain history processor or as a pydantic-ai capability.

The processing order of the toolkit (the spine):
PatchToolCalls -> EvictionProcessor -> user processors -> ContextManagerMiddleware (persist, count, compress).
"""

from ._counters import ProviderTokenCounter, TiktokenCounter, UsageAnchoredCounter
from ._cutoff import find_safe_cutoff
from ._events import (
    CompactionCompleted,
    CompactionSkipped,
    CompactionStarted,
    ContextEvent,
    EventCallback,
    LimitWarningIssued,
    SummarizerFallback,
    ToolResultsCleared,
    WindowTrimmed,
)
from ._messages import (
    MESSAGE_ID_KEY,
    SUMMARY_METADATA_KEY,
    HistoryProblem,
    ProblemKind,
    ToolPairIndex,
    get_message_id,
    is_summary_message,
    summary_info,
    summary_part,
    validate_history,
)
from ._render import render_message, render_messages
from ._sizes import ContextSize
from ._tokens import (
    IncrementalCounter,
    RequestAwareCounter,
    RequestInfo,
    TokenCounter,
    async_count_tokens,
    count_tokens_approximately,
    estimate_message_tokens,
)
from ._windows import DEFAULT_MAX_TOKENS, resolve_max_tokens
from .processors import (
    ClearToolResultsProcessor,
    HistoryProcessor,
    LimitWarnerProcessor,
    SlidingWindowProcessor,
    SummarizationProcessor,
)
from .summarize import (
    DEFAULT_SUMMARY_PROMPT,
    DeterministicSummarizer,
    LLMSummarizer,
    Summarizer,
    SummarizerError,
    SummaryRequest,
)

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_SUMMARY_PROMPT",
    "MESSAGE_ID_KEY",
    "SUMMARY_METADATA_KEY",
    "ClearToolResultsProcessor",
    "CompactionCompleted",
    "CompactionSkipped",
    "CompactionStarted",
    "ContextEvent",
    "ContextSize",
    "DeterministicSummarizer",
    "EventCallback",
    "HistoryProblem",
    "HistoryProcessor",
    "IncrementalCounter",
    "LLMSummarizer",
    "LimitWarnerProcessor",
    "LimitWarningIssued",
    "ProblemKind",
    "ProviderTokenCounter",
    "RequestAwareCounter",
    "RequestInfo",
    "SlidingWindowProcessor",
    "SummarizationProcessor",
    "Summarizer",
    "SummarizerError",
    "SummarizerFallback",
    "SummaryRequest",
    "TiktokenCounter",
    "TokenCounter",
    "ToolPairIndex",
    "ToolResultsCleared",
    "UsageAnchoredCounter",
    "WindowTrimmed",
    "async_count_tokens",
    "count_tokens_approximately",
    "estimate_message_tokens",
    "find_safe_cutoff",
    "get_message_id",
    "is_summary_message",
    "render_message",
    "render_messages",
    "resolve_max_tokens",
    "summary_info",
    "summary_part",
    "validate_history",
]

__version__ = "0.1.0"
