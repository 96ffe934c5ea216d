"""The session families the probes can be run on, by name.

Two families written independently of each other, so that a compaction path cannot be tuned to one generator:
`coding` (a coding agent: `read_file`, `write_file`, `edit_file`, `run_tests`, `write_todos`) and `analysis` (a
data-analysis agent: `run_sql`, `run_python`, `save_chart`, `write_report`, `update_plan`), with different tools,
different phrasings of decisions and different shapes of errors.
"""

from __future__ import annotations

from collections.abc import Callable

from ._analysis import build_analysis_session
from ._session import Session, build_session

__all__ = ["SESSION_FAMILIES", "build_family_session"]

SESSION_FAMILIES: dict[str, Callable[[int, int], Session]] = {
    "coding": build_session,
    "analysis": build_analysis_session,
}
"""Session builders by family name: `builder(messages, seed) -> Session`."""


def build_family_session(family: str, messages: int = 200, seed: int = 0) -> Session:
    """A session of `family` (`"coding"` or `"analysis"`) with at least `messages` messages."""
    builder = SESSION_FAMILIES.get(family)
    if builder is None:
        raise ValueError(f"unknown session family {family!r}: expected one of {sorted(SESSION_FAMILIES)}")
    return builder(messages, seed)
