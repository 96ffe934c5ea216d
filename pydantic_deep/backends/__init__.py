"""Backends: async virtual file systems for the harness and its file tools.

Paths are virtual: `/` is the backend's root, `..` cannot climb above it, and `/x` and `x` name the same file.

```python
import asyncio
from pydantic_deep.backends import CompositeBackend, LocalBackend, StateBackend

memory = StateBackend()                                   # in memory, saved with the session
disk = LocalBackend("workspace")                          # a directory no path can leave
fs = CompositeBackend(memory, routes={"/workspace/": disk})


async def main() -> None:
    await fs.write("/workspace/app.py", "print('hi')\\n")
    await fs.write("/scratch.md", "notes")
    print(await fs.glob("**/*.py"))                       # ['/workspace/app.py']


asyncio.run(main())
```
"""

from ._composite import CompositeBackend
from ._local import LocalBackend
from ._protocol import (
    BINARY_SNIFF_CHARS,
    MAX_COMPONENT_BYTES,
    MAX_PATH_BYTES,
    BackendError,
    BackendProtocol,
    EditError,
    FileInfo,
    GrepMatch,
    PathEscapeError,
    apply_edit,
    compile_grep_pattern,
    grep_lines,
    grep_path_matches,
    match_glob,
    normalize_path,
)
from ._state import StateBackend, StateBackendDict, StateFileDict

__all__ = [
    "BINARY_SNIFF_CHARS",
    "MAX_COMPONENT_BYTES",
    "MAX_PATH_BYTES",
    "BackendError",
    "BackendProtocol",
    "CompositeBackend",
    "EditError",
    "FileInfo",
    "GrepMatch",
    "LocalBackend",
    "PathEscapeError",
    "StateBackend",
    "StateBackendDict",
    "StateFileDict",
    "apply_edit",
    "compile_grep_pattern",
    "grep_lines",
    "grep_path_matches",
    "match_glob",
    "normalize_path",
]
