"""The agent's memory: where its file may live, how it is read, whether it was written since a request, and the
history cut down to it."""

from __future__ import annotations

import hashlib
import inspect
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest

from .._compaction import assemble_merged, build_summary_message, plan_compaction
from .._summary_run import SummaryOutcome
from .._tokens import estimate_text_tokens
from ..processors._summary_plan import new_problems

__all__ = [
    "MemoryReader",
    "Snapshot",
    "check_relative_path",
    "memory_history",
    "memory_text",
    "problem_with",
    "read_local",
    "read_with",
]

MemoryReader = Callable[[RunContext[Any], str], "Awaitable[str | None] | str | None"]
"""`(ctx, path) -> text`: the memory file's content, or `None` (or `FileNotFoundError`) when it does not exist.
`path` is relative to the memory root, with `/` separators (e.g. `memory/short_term/recent.md`)."""


@dataclass(frozen=True)
class Snapshot:
    """What the memory file looked like at one moment."""

    fingerprint: tuple[object, ...] | None
    """Changes whenever the file is written (mtime and content hash locally, content hash through a reader);
    `None` when the file does not exist."""
    text: str | None
    error: str | None = None
    """Why the file could not be read (other than not existing)."""


def check_relative_path(path: str, name: str) -> str:
    """Refuse a memory path that is absolute or climbs out of the root; returns it with `/` separators."""
    if not isinstance(path, str) or not path.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(f"{name} must be a non-empty relative path, got {path!r}")
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute() or PureWindowsPath(path).drive:
        raise ValueError(f"{name} must be relative to the memory root, got the absolute path {path!r}")
    parts = PurePosixPath(path.replace("\\", "/")).parts
    if ".." in parts:
        raise ValueError(f"{name} must stay inside the memory root, got {path!r} (a '..' component)")
    if "\x00" in path:
        raise ValueError(f"{name} must not contain a NUL byte")
    return "/".join(parts)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_local(root: str | os.PathLike[str], relative: str) -> Snapshot:
    """Read `root/relative` from the local filesystem; a symlink that leads out of the root is refused."""
    base = Path(root).resolve()
    target = (base / relative).resolve()
    if not target.is_relative_to(base):
        return Snapshot(None, None, f"{relative} leads outside the memory root {base} (refused)")
    try:
        stat = target.stat()
        data = target.read_bytes()
    except FileNotFoundError:
        return Snapshot(None, None)
    except OSError as exc:
        return Snapshot(None, None, f"cannot read {relative}: {type(exc).__name__}: {exc}")
    return Snapshot((stat.st_mtime_ns, _digest(data)), data.decode("utf-8", "replace"))


async def read_with(reader: MemoryReader, ctx: RunContext[Any], relative: str) -> Snapshot:
    """Read through a pluggable reader (e.g. a pydantic_deep backend); written means the content changed."""
    try:
        result = reader(ctx, relative)
        text = await result if inspect.isawaitable(result) else result
    except FileNotFoundError:
        return Snapshot(None, None)
    except Exception as exc:  # the reader's failure is the attempt's failure, never the run's
        return Snapshot(None, None, f"cannot read {relative}: {type(exc).__name__}: {exc}")
    if text is None:
        return Snapshot(None, None)
    if not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        return Snapshot(None, None, f"the memory reader returned {type(text).__name__}, not text")
    return Snapshot((_digest(text.encode("utf-8", "replace")),), text)


def problem_with(snapshot: Snapshot, baseline: Snapshot, path: str, max_tokens: int) -> str | None:
    """Why `snapshot` does not count as memory written since `baseline`, or `None` when it does."""
    if snapshot.error is not None:
        return snapshot.error
    if snapshot.fingerprint is None or snapshot.text is None:
        return f"{path} does not exist"
    if snapshot.fingerprint == baseline.fingerprint:
        return f"{path} was not written since the request"
    if not snapshot.text.strip():
        return f"{path} is empty"
    tokens = estimate_text_tokens(snapshot.text)
    if tokens > max_tokens:
        return f"{path} is too long (about {tokens:,} tokens; at most {max_tokens:,})"
    return None


def memory_text(memory: str, path: str) -> str:
    """The memory as the agent will find it in its history: labelled with where it came from."""
    return f"[Memory written by the agent to {path} before the conversation was compacted]\n\n{memory.strip()}"


def memory_history(
    messages: list[ModelMessage], text: str, *, keep_tokens: int
) -> tuple[list[ModelMessage], ModelRequest] | None:
    """The history cut to its most recent `keep_tokens` (pair-safe, the in-flight exchange always kept) with
    `text` in place of the rest, as a summary (`CompactionPart`) that carries the latest user request verbatim
    when that request was cut. Returns (history, the summary message), or `None` when nothing can be cut."""
    plan = plan_compaction(messages, ("tokens", keep_tokens))
    if plan is None:
        return None
    summary = build_summary_message(plan, SummaryOutcome(text, "agent-memory", 0.0), focus=None)
    result, merged = assemble_merged(messages, plan, summary)
    problems = new_problems(messages, result)
    if problems:
        raise RuntimeError(f"the compacted history would be invalid: {problems}")
    return result, merged
