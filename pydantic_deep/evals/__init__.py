"""Scripted sessions through the harness, for benchmarks and tests.

`CodingSession` plays a deterministic coding agent (file reads, greps, long test logs, edits, todos, fetched
documents, tool errors) through `create_deep_agent`, recording every request its model receives; see
`benchmarks/coding_session.py` for the cost of each context configuration with the prompt cache counted.
"""

from ._coding_session import CodingSession, CodingSessionResult

__all__ = ["CodingSession", "CodingSessionResult"]
