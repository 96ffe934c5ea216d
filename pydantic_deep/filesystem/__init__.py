"""File tools for agents: `FilesystemToolset` (ls, read_file, write_file, edit_file, glob, grep) and `HygieneToolset`
(organize_virtual_fs, cleanup_old_archives), both working through the run's backend.

```python
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from pydantic_deep.backends import StateBackend
from pydantic_deep.filesystem import FilesystemToolset, HygieneToolset

backend = StateBackend({"/README.md": "# Project\n"})
agent = Agent(TestModel(), toolsets=[FilesystemToolset(backend=backend), HygieneToolset(backend=backend)])
```
"""

from ._format import DEFAULT_READ_LIMIT, MAX_LINE_CHARS, format_grep, format_ls, number_lines
from ._hidden import DEFAULT_HIDDEN_DIRS
from ._hygiene import (
    CleanupResult,
    HygieneToolset,
    PrefixGroup,
    VirtualFsOverview,
    archive_time,
    cleanup_old_archives,
    list_files,
    organize_virtual_fs,
)
from ._toolset import FilesystemToolset, describe_error, resolve_backend

__all__ = [
    "DEFAULT_HIDDEN_DIRS",
    "DEFAULT_READ_LIMIT",
    "MAX_LINE_CHARS",
    "CleanupResult",
    "FilesystemToolset",
    "HygieneToolset",
    "PrefixGroup",
    "VirtualFsOverview",
    "archive_time",
    "cleanup_old_archives",
    "describe_error",
    "format_grep",
    "format_ls",
    "list_files",
    "number_lines",
    "organize_virtual_fs",
    "resolve_backend",
]
