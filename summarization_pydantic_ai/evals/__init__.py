"""Quality probes: does a compaction path keep what an agent needs to carry on?

Build a long, realistic session with planted facts (files created and edited, todo states, decisions, errors and
their fixes, the latest user request), run a compaction path on it, and score how many questions about those
facts are still answerable from the compacted working history, plus what rehydration returns. Scoring is
deterministic string matching: no model is called.

Example:
    ```python
    report = run_probes(SummarizationProcessor(None, trigger=('messages', 100), keep=20), messages=200)
    print(report)
    ```

Command line: `python -m summarization_pydantic_ai.evals --messages 1000 --strategy summarization`.
"""

from ._analysis import build_analysis_session
from ._browser import BROWSER_PHASES, BrowserSession, BrowserSessionResult, SeenRequest
from ._derive import derive_probes, load_messages
from ._families import SESSION_FAMILIES, build_family_session
from ._probes import ARTIFACT_CATEGORIES, CATEGORIES, FoundIn, Probe, ProbeResult, todo_patterns
from ._recording import Planner, RecordedRequest, RecordingModel, SummaryWriter, is_summary_request, scripted_summary
from ._report import CategoryScore, ProbeReport
from ._run import CompactFn, RehydrateFn, arun_probes, run_probes
from ._session import MIN_MESSAGES, Session, build_session

__all__ = [
    "ARTIFACT_CATEGORIES",
    "BROWSER_PHASES",
    "CATEGORIES",
    "MIN_MESSAGES",
    "SESSION_FAMILIES",
    "BrowserSession",
    "BrowserSessionResult",
    "CategoryScore",
    "CompactFn",
    "FoundIn",
    "Planner",
    "Probe",
    "ProbeReport",
    "ProbeResult",
    "RecordedRequest",
    "RecordingModel",
    "RehydrateFn",
    "SeenRequest",
    "Session",
    "SummaryWriter",
    "arun_probes",
    "build_analysis_session",
    "build_family_session",
    "build_session",
    "derive_probes",
    "is_summary_request",
    "load_messages",
    "run_probes",
    "scripted_summary",
    "todo_patterns",
]
