"""Eviction settings: per-tool policies, retention, file naming, and the events eviction reports."""

from __future__ import annotations

import fnmatch
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from summarization_pydantic_ai.compression import PreviewKind

__all__ = [
    "EVICTION_METADATA_KEY",
    "MCP_POLICY",
    "EvictionFailed",
    "EvictionPolicy",
    "OutputArchived",
    "OutputEvicted",
    "RetentionPolicy",
    "safe_file_id",
]

EVICTION_METADATA_KEY = "pydantic_deep.eviction"
"""Key in `ToolReturnPart.metadata` recording an eviction: path, tokens, preview kind, mode and state."""

_SAFE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")
_NAMING_FIELDS = ("id", "tool_name", "kind", "timestamp", "hash")


@dataclass(frozen=True)
class EvictionPolicy:
    """How outputs of tools whose name matches `pattern` (fnmatch, e.g. `mcp__*`) are evicted.

    Example:
        ```python
        EvictionPolicy('browser_*', token_limit=5_000, preview='snapshot')
        ```
    """

    pattern: str = "*"
    token_limit: int | None = None
    """Overrides the processor's `token_limit` for these tools."""
    preview: PreviewKind = "auto"
    naming: str = "{id}"
    """File name template with `{id}` (safe call id), `{tool_name}`, `{kind}`, `{timestamp}`, `{hash}`."""
    mode: Literal["evict", "agent"] = "evict"
    """`agent`: the output stays visible once, marked, and is archived when the agent asks or after
    `archive_after_turns` model turns."""
    archive_after_turns: int = 3

    def __post_init__(self) -> None:
        if self.token_limit is not None and self.token_limit < 1:
            raise ValueError(f"token_limit must be positive, got {self.token_limit}")
        if self.archive_after_turns < 1:
            raise ValueError(f"archive_after_turns must be >= 1, got {self.archive_after_turns}")
        try:
            name = self.naming.format(**dict.fromkeys(_NAMING_FIELDS, "x"))
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"naming may only use {{{'}, {'.join(_NAMING_FIELDS)}}}: {exc}") from exc
        if "/" in name or not name.strip("."):
            raise ValueError(f"naming must produce a plain file name, got {self.naming!r}")

    def matches(self, tool_name: str) -> bool:
        return fnmatch.fnmatchcase(tool_name, self.pattern)

    def file_name(
        self, *, tool_call_id: str, tool_name: str, kind: str, digest: str, now: datetime | None = None
    ) -> str:
        stamp = (now or datetime.now(UTC)).strftime("%Y%m%d_%H%M%S")
        raw = self.naming.format(
            id=safe_file_id(tool_call_id),
            tool_name=safe_file_id(tool_name),
            kind=kind,
            timestamp=stamp,
            hash=digest[:16],
        )
        return raw if len(raw.encode()) <= 200 else safe_file_id(raw)


MCP_POLICY = EvictionPolicy("mcp__*", naming="mcp_{kind}_{timestamp}.json")
"""MCP tool outputs archived as `mcp_<kind>_<YYYYMMDD_HHMMSS>.json`."""


def safe_file_id(value: str) -> str:
    """`value` itself when it is a short, safe file name; else a stable hash of it (`id_<24 hex>`)."""
    if _SAFE_ID.fullmatch(value):
        return value
    return "id_" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:24]


@dataclass(frozen=True)
class RetentionPolicy:
    """Limits on the eviction directory of one backend; the oldest files go first."""

    max_files: int | None = 500
    max_bytes: int | None = 200_000_000
    max_age_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_files", "max_bytes", "max_age_s"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")


@dataclass(frozen=True)
class OutputEvicted:
    """A tool output was saved to the backend and replaced by a preview."""

    tool_name: str
    tool_call_id: str
    path: str
    tokens: int
    preview_kind: str
    deduplicated: bool
    """The same content was already stored; the existing file is referenced."""


@dataclass(frozen=True)
class OutputArchived:
    """An output kept visible in agent mode was archived (at the agent's request or after its turns ran out)."""

    tool_call_id: str
    path: str
    requested_by_agent: bool


@dataclass(frozen=True)
class EvictionFailed:
    """Saving an output failed; the original output stays in the history."""

    tool_name: str
    tool_call_id: str
    error: str
