"""Cost tracking: what a run and a session cost, by kind of request, and what compaction saved.

In the engine (not the harness) so that any pydantic-ai agent can use it. Prices come from genai-prices
(`calc_price`); a model it does not know has its tokens counted and its cost reported as unknown, never as 0.
"""

from ._budget import BudgetExceededError, amount_text
from ._cache import CACHE_METADATA_KEY, CacheStamp, ReductionEffect
from ._capability import CostTrackingMiddleware
from ._ledger import CostLedger, Priced, session_costs
from ._records import REQUEST_KIND_KEY, SUMMARIZER_USAGE_KEY, RequestKind, report_summarizer_usage
from ._spend import CompactionSaving, CostTotals, Spend, format_cost

__all__ = [
    "CACHE_METADATA_KEY",
    "REQUEST_KIND_KEY",
    "SUMMARIZER_USAGE_KEY",
    "BudgetExceededError",
    "CacheStamp",
    "CompactionSaving",
    "CostLedger",
    "CostTotals",
    "CostTrackingMiddleware",
    "Priced",
    "ReductionEffect",
    "RequestKind",
    "Spend",
    "amount_text",
    "format_cost",
    "report_summarizer_usage",
    "session_costs",
]
