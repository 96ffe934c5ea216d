"""`ContextMetrics`: tokens seen per run and per session, each reduction and checkpoint, totals and span attributes."""

from ._capability import ContextMetrics
from ._records import CheckpointRecord, MetricsSummary, ReductionRecord, RequestRecord

__all__ = ["CheckpointRecord", "ContextMetrics", "MetricsSummary", "ReductionRecord", "RequestRecord"]
