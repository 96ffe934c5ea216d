"""A session's folder on this host, `<base_dir>/sessions/<id>/`: what is not history (evicted outputs, plans), for
every store, and `session.json` (creation time, where a fork comes from) in the file layout."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from ._info import METADATA_FILE

__all__ = [
    "COPIED_DIRS",
    "SessionExistsError",
    "SessionNotFoundError",
    "copy_side_dirs",
    "new_folder",
    "now",
    "write_metadata",
]

COPIED_DIRS = ("large_tool_results", "plans")
"""What a fork takes along besides the history: the evicted outputs its previews point at, and the plans."""


class SessionNotFoundError(LookupError):
    """No session with that id in the store (under the base directory, or in the database)."""


class SessionExistsError(FileExistsError):
    """A session with that id exists already (`create` and `fork` never write into an existing session)."""


def now() -> str:
    return datetime.now(UTC).isoformat()


def new_folder(sessions_dir: Path, session_id: str, where: str) -> Path:
    """Create `<sessions_dir>/<session_id>`; `SessionExistsError` when it exists (`where`: the store, to say so)."""
    folder = sessions_dir / session_id
    sessions_dir.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir()
    except FileExistsError:
        raise SessionExistsError(f"a session {session_id!r} exists already in {where}") from None
    return folder


def write_metadata(folder: Path, data: dict[str, str]) -> None:
    (folder / METADATA_FILE).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def copy_side_dirs(source: Path, target: Path) -> None:
    """Copy the evicted outputs and plans of `source` into `target` (hard links where the file system allows)."""
    for name in COPIED_DIRS:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name, copy_function=_link_or_copy, symlinks=True)


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link (instant, no space) where possible: evicted outputs are written once and never edited."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
