"""The session report: one self-contained HTML page of what a session did and cost.

Context per request against the window and the compaction threshold, with markers for compactions, evictions and
overflow recoveries; cumulative cost; the largest tool outputs; the summaries. Built from the history store alone:
`ContextManagerMiddleware` writes each request's measure on its response (`REQUEST_METADATA_KEY`), a summary's
record says what its compaction did, an evicted output's metadata names its file.
"""

from ..context_manager._stamp import REQUEST_METADATA_KEY
from ._timeline import (
    EVICTION_METADATA_KEY,
    Compaction,
    Eviction,
    OverflowRecovery,
    RequestPoint,
    SessionTimeline,
    ToolOutput,
    build_timeline,
)
from ._write import ReportSource, render_session_report, write_session_report, write_session_report_async

__all__ = [
    "EVICTION_METADATA_KEY",
    "REQUEST_METADATA_KEY",
    "Compaction",
    "Eviction",
    "OverflowRecovery",
    "ReportSource",
    "RequestPoint",
    "SessionTimeline",
    "ToolOutput",
    "build_timeline",
    "render_session_report",
    "write_session_report",
    "write_session_report_async",
]
