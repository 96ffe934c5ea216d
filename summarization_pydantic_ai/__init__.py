"""summarization_pydantic_ai: the context engine for pydantic-ai agents.

Token accounting, context windows, pair-safe cutoffs, summaries, sliding windows and tool-result clearing,
each usable as a plain history processor or as a pydantic-ai capability.

The processing order of the toolkit (the spine):
PatchToolCalls -> EvictionProcessor -> user processors -> ContextManagerMiddleware (persist, count, compress).

`PostgresHistoryStore`, `PostgresHistoryDatabase` (the `postgres` extra: psycopg) and `write_session_report`,
`write_session_report_async` are imported on first use: importing the package needs neither.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._compaction import CompactionPlan, plan_compaction
from ._counters import ProviderTokenCounter, TiktokenCounter, UsageAnchoredCounter
from ._cursor import CursorTable, HistoryChange, HistoryCursor
from ._cutoff import find_safe_cutoff
from ._events import (
    AgentCompressionCompleted,
    AgentCompressionFallback,
    AgentCompressionRequested,
    BudgetExceeded,
    BudgetWarningIssued,
    CallbackFailed,
    CompactionCompleted,
    CompactionFailed,
    CompactionSkipped,
    CompactionStarted,
    ContextEvent,
    ContextReduced,
    CostRecorded,
    EventCallback,
    LimitWarningIssued,
    OverflowRecovered,
    OverflowRecoveryFailed,
    OverflowRetry,
    PhaseCheckpointed,
    PreservedItem,
    SummarizerFallback,
    ToolOutputTruncated,
    ToolResultsCleared,
    ToolResultsCompressed,
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
from ._working_set import DEFAULT_TODO_TOOLS
from .cache import (
    AnthropicPromptCache,
    CachedRequest,
    CachePrices,
    CacheReport,
    CacheSimulator,
    DeepSeekPromptCache,
    GooglePromptCache,
    OpenAIPromptCache,
    PromptCache,
    SentRequest,
    cache_prices,
    prompt_cache_for,
    rewrite_cost,
)
from .compression import (
    COMPRESSED_METADATA_KEY,
    CompressionResult,
    MessageCompressor,
    compress,
    compress_json,
    compress_log,
    compress_snapshot,
    compress_text,
)
from .context_manager import (
    DEFAULT_COMPRESSION_REQUEST,
    AgentDrivenCompression,
    ContextManagerMiddleware,
    ContextUsage,
    MemoryReader,
    Truncation,
    truncate_output,
    truncate_text,
)
from .cost import (
    BudgetExceededError,
    CostTotals,
    CostTrackingMiddleware,
    Spend,
    format_cost,
    session_costs,
)
from .metrics import CheckpointRecord, ContextMetrics, MetricsSummary, ReductionRecord, RequestRecord
from .phases import CompletedPhase, PhaseCheckpoints
from .processors import (
    ClearToolResultsProcessor,
    HistoryProcessor,
    LimitWarnerProcessor,
    SlidingWindowProcessor,
    SummarizationProcessor,
)
from .pruning import ImportancePruner, ImportanceScore, ImportanceWeights
from .store import (
    CopyReport,
    DamagedRange,
    HistoryDatabase,
    HistoryPage,
    HistoryStore,
    HistoryStoreConflictError,
    HistoryStoreError,
    HistoryStoreLockedError,
    InvalidSessionIdError,
    JsonHistoryDatabase,
    JsonHistoryStore,
    RecordBatch,
    SearchableHistoryStore,
    SearchHit,
    SearchQueryError,
    SessionSummary,
    SQLiteHistoryDatabase,
    SQLiteHistoryStore,
    StoredRecord,
    StoreReport,
    StoreURLError,
    copy_sessions,
    ensure_message_id,
    new_message_id,
    open_database,
    open_store,
    read_records,
    redact_url,
    validate_session_id,
    working_context,
)
from .strategies import STRATEGIES, CompressionLevel, ContextConfig, Strategy
from .summarize import (
    DEFAULT_REQUIRED_SECTIONS,
    DEFAULT_SUMMARY_PROMPT,
    RUN_MODEL,
    DeterministicSummarizer,
    LiveRequest,
    LLMSummarizer,
    Summarizer,
    SummarizerError,
    SummaryRequest,
)

if TYPE_CHECKING:
    from .report import write_session_report, write_session_report_async
    from .store import PostgresHistoryDatabase, PostgresHistoryStore

_LAZY = {
    "PostgresHistoryDatabase": "store",
    "PostgresHistoryStore": "store",
    "write_session_report": "report",
    "write_session_report_async": "report",
}
"""Public names imported on first use, and the sub-package that has them."""


def __getattr__(name: str) -> Any:
    package = _LAZY.get(name)
    if package is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{package}"), name)  # the store says what to install for psycopg


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "COMPRESSED_METADATA_KEY",
    "DEFAULT_COMPRESSION_REQUEST",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_REQUIRED_SECTIONS",
    "DEFAULT_SUMMARY_PROMPT",
    "DEFAULT_TODO_TOOLS",
    "MESSAGE_ID_KEY",
    "RUN_MODEL",
    "STRATEGIES",
    "SUMMARY_METADATA_KEY",
    "AgentCompressionCompleted",
    "AgentCompressionFallback",
    "AgentCompressionRequested",
    "AgentDrivenCompression",
    "AnthropicPromptCache",
    "BudgetExceeded",
    "BudgetExceededError",
    "BudgetWarningIssued",
    "CachePrices",
    "CacheReport",
    "CacheSimulator",
    "CachedRequest",
    "CallbackFailed",
    "CheckpointRecord",
    "ClearToolResultsProcessor",
    "CompactionCompleted",
    "CompactionFailed",
    "CompactionPlan",
    "CompactionSkipped",
    "CompactionStarted",
    "CompletedPhase",
    "CompressionLevel",
    "CompressionResult",
    "ContextConfig",
    "ContextEvent",
    "ContextManagerMiddleware",
    "ContextMetrics",
    "ContextReduced",
    "ContextSize",
    "ContextUsage",
    "CopyReport",
    "CostRecorded",
    "CostTotals",
    "CostTrackingMiddleware",
    "CursorTable",
    "DamagedRange",
    "DeepSeekPromptCache",
    "DeterministicSummarizer",
    "EventCallback",
    "GooglePromptCache",
    "HistoryChange",
    "HistoryCursor",
    "HistoryDatabase",
    "HistoryPage",
    "HistoryProblem",
    "HistoryProcessor",
    "HistoryStore",
    "HistoryStoreConflictError",
    "HistoryStoreError",
    "HistoryStoreLockedError",
    "ImportancePruner",
    "ImportanceScore",
    "ImportanceWeights",
    "IncrementalCounter",
    "InvalidSessionIdError",
    "JsonHistoryDatabase",
    "JsonHistoryStore",
    "LLMSummarizer",
    "LimitWarnerProcessor",
    "LimitWarningIssued",
    "LiveRequest",
    "MemoryReader",
    "MessageCompressor",
    "MetricsSummary",
    "OpenAIPromptCache",
    "OverflowRecovered",
    "OverflowRecoveryFailed",
    "OverflowRetry",
    "PhaseCheckpointed",
    "PhaseCheckpoints",
    "PostgresHistoryDatabase",
    "PostgresHistoryStore",
    "PreservedItem",
    "ProblemKind",
    "PromptCache",
    "ProviderTokenCounter",
    "RecordBatch",
    "ReductionRecord",
    "RequestAwareCounter",
    "RequestInfo",
    "RequestRecord",
    "SQLiteHistoryDatabase",
    "SQLiteHistoryStore",
    "SearchHit",
    "SearchQueryError",
    "SearchableHistoryStore",
    "SentRequest",
    "SessionSummary",
    "SlidingWindowProcessor",
    "Spend",
    "StoreReport",
    "StoreURLError",
    "StoredRecord",
    "Strategy",
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
    "ToolResultsCompressed",
    "Truncation",
    "UsageAnchoredCounter",
    "UsageUpdated",
    "WindowTrimmed",
    "async_count_tokens",
    "cache_prices",
    "compress",
    "compress_json",
    "compress_log",
    "compress_snapshot",
    "compress_text",
    "copy_sessions",
    "count_tokens_approximately",
    "ensure_message_id",
    "estimate_message_tokens",
    "find_safe_cutoff",
    "format_cost",
    "get_message_id",
    "is_summary_message",
    "new_message_id",
    "open_database",
    "open_store",
    "plan_compaction",
    "prompt_cache_for",
    "read_records",
    "redact_url",
    "render_message",
    "render_messages",
    "resolve_max_tokens",
    "rewrite_cost",
    "session_costs",
    "summary_info",
    "summary_part",
    "truncate_output",
    "truncate_text",
    "validate_history",
    "validate_session_id",
    "working_context",
    "write_session_report",
    "write_session_report_async",
]

__version__ = "0.1.0"
