"""summarization_pydantic_ai: the context engine for pydantic-ai agents.

Token accounting, context windows, pair-safe cutoffs, summaries, sliding windows and tool-result clearing,
each usable as a plain history processor or as a pydantic-ai capability.

The processing order of the toolkit (the spine):
PatchToolCalls -> EvictionProcessor -> user processors -> ContextManagerMiddleware (persist, count, compress).
"""

from ._compaction import CompactionPlan, plan_compaction
from ._counters import ProviderTokenCounter, TiktokenCounter, UsageAnchoredCounter
from ._cursor import CursorTable, HistoryChange, HistoryCursor
from ._cutoff import find_safe_cutoff
from ._events import (
    CallbackFailed,
    CompactionCompleted,
    CompactionFailed,
    CompactionSkipped,
    CompactionStarted,
    ContextEvent,
    EventCallback,
    LimitWarningIssued,
    SummarizerFallback,
    ToolOutputTruncated,
    ToolResultsCleared,
    UsageUpdated,
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
from .context_manager import ContextManagerMiddleware, ContextUsage, Truncation, truncate_output, truncate_text
from .processors import (
    ClearToolResultsProcessor,
    HistoryProcessor,
    LimitWarnerProcessor,
    SlidingWindowProcessor,
    SummarizationProcessor,
)
from .store import (
    DamagedRange,
    HistoryPage,
    HistoryStore,
    HistoryStoreError,
    HistoryStoreLockedError,
    InvalidSessionIdError,
    JsonHistoryStore,
    RecordBatch,
    StoredRecord,
    StoreReport,
    ensure_message_id,
    new_message_id,
    read_records,
    validate_session_id,
    working_context,
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
    "CallbackFailed",
    "ClearToolResultsProcessor",
    "CompactionCompleted",
    "CompactionFailed",
    "CompactionPlan",
    "CompactionSkipped",
    "CompactionStarted",
    "ContextEvent",
    "ContextManagerMiddleware",
    "ContextSize",
    "ContextUsage",
    "CursorTable",
    "DamagedRange",
    "DeterministicSummarizer",
    "EventCallback",
    "HistoryChange",
    "HistoryCursor",
    "HistoryPage",
    "HistoryProblem",
    "HistoryProcessor",
    "HistoryStore",
    "HistoryStoreError",
    "HistoryStoreLockedError",
    "IncrementalCounter",
    "InvalidSessionIdError",
    "JsonHistoryStore",
    "LLMSummarizer",
    "LimitWarnerProcessor",
    "LimitWarningIssued",
    "ProblemKind",
    "ProviderTokenCounter",
    "RecordBatch",
    "RequestAwareCounter",
    "RequestInfo",
    "SlidingWindowProcessor",
    "StoreReport",
    "StoredRecord",
    "SummarizationProcessor",
    "Summarizer",
    "SummarizerError",
    "SummarizerFallback",
    "SummaryRequest",
    "TiktokenCounter",
    "TokenCounter",
    "ToolOutputTruncated",
    "ToolPairIndex",
    "ToolResultsCleared",
    "Truncation",
    "UsageAnchoredCounter",
    "UsageUpdated",
    "WindowTrimmed",
    "async_count_tokens",
    "count_tokens_approximately",
    "ensure_message_id",
    "estimate_message_tokens",
    "find_safe_cutoff",
    "get_message_id",
    "is_summary_message",
    "new_message_id",
    "plan_compaction",
    "read_records",
    "render_message",
    "render_messages",
    "resolve_max_tokens",
    "summary_info",
    "summary_part",
    "truncate_output",
    "truncate_text",
    "validate_history",
    "validate_session_id",
    "working_context",
]

__version__ = "0.1.0"
