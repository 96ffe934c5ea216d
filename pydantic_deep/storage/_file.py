"""The `file://` storage: today's layout under one base directory.

`<base>/sessions/<id>/messages.json` (histories), `<base>/sessions/<id>/checkpoints.json` (checkpoints),
`<base>/<agent_name>/MEMORY.md` (memories).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Generator
from pathlib import Path

import anyio.to_thread

from ..memory._storage import MEMORY_FILE, check_agent_name
from ._protocols import StorageError

__all__ = ["FileMemoryStore"]


class FileMemoryStore:
    """Memories as `<base>/<agent_name>/MEMORY.md`; a compare-and-swap holds an exclusive `flock` on the base
    directory (the lock `AgentMemoryToolset` takes on it for a local memory) and replaces the file atomically."""

    def __init__(self, base_dir: str | os.PathLike[str]) -> None:
        self.base_dir = Path(base_dir).expanduser().resolve()

    @property
    def url(self) -> str:
        return self.base_dir.as_uri()

    def path_of(self, agent_name: str) -> Path:
        return self.base_dir / check_agent_name(agent_name) / MEMORY_FILE

    async def read(self, agent_name: str) -> str | None:
        path = self.path_of(agent_name)
        return await anyio.to_thread.run_sync(_read, path)

    async def compare_and_swap(self, agent_name: str, expected: str | None, content: str) -> bool:
        path = self.path_of(agent_name)

        def swap() -> bool:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with _locked(self.base_dir):
                    if _read(path) != expected:
                        return False
                    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
                    temporary.write_text(content, encoding="utf-8")
                    os.replace(temporary, path)
                    return True
            except OSError as exc:
                raise StorageError(f"cannot write the memory {path}: {exc}") from exc

        return await anyio.to_thread.run_sync(swap)

    async def names(self) -> list[str]:
        return sorted(p.parent.name for p in self.base_dir.glob(f"*/{MEMORY_FILE}") if p.is_file())


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot read the memory {path}: {exc}") from exc


@contextlib.contextmanager
def _locked(directory: Path) -> Generator[None]:
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
