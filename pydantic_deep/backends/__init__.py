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
from ._grep import (
    GREP_LINE_TIMEOUT,
    GREP_MIN_RATE,
    GREP_SLOW_AFTER,
    GREP_TIME_LIMIT,
    GrepBudget,
    GrepStopped,
    compile_grep_pattern,
    grep_lines,
    grep_path_matches,
)
from ._local import LocalBackend
from ._names import escape_name, unescape_name
from ._pages import LOOKAHEAD_BYTES, FilePage, SupportsReadPage, read_page_from, text_page
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
    count_occurrences,
    match_glob,
    normalize_path,
)
from ._state import StateBackend, StateBackendDict, StateFileDict

__all__ = [
    "BINARY_SNIFF_CHARS",
    "GREP_LINE_TIMEOUT",
    "GREP_MIN_RATE",
    "GREP_SLOW_AFTER",
    "GREP_TIME_LIMIT",
    "LOOKAHEAD_BYTES",
    "MAX_COMPONENT_BYTES",
    "MAX_PATH_BYTES",
    "BackendError",
    "BackendProtocol",
    "CompositeBackend",
    "EditError",
    "FileInfo",
    "FilePage",
    "GrepBudget",
    "GrepMatch",
    "GrepStopped",
    "LocalBackend",
    "PathEscapeError",
    "StateBackend",
    "StateBackendDict",
    "StateFileDict",
    "SupportsReadPage",
    "apply_edit",
    "compile_grep_pattern",
    "count_occurrences",
    "escape_name",
    "grep_lines",
    "grep_path_matches",
    "match_glob",
    "normalize_path",
    "read_page_from",
    "text_page",
    "unescape_name",
]
