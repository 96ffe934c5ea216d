"""Tool-name patterns that say what a tool's output is (a page snapshot, console output): a leaf module, shared by
the compressors and the thinning of planned reductions."""

from __future__ import annotations

__all__ = ["DEFAULT_CONSOLE_TOOLS", "DEFAULT_SNAPSHOT_TOOLS"]

DEFAULT_SNAPSHOT_TOOLS: tuple[str, ...] = ("*snapshot*", "*accessibility*", "*page_content*", "*get_html*")
"""Tool-name patterns (`fnmatch`, case-insensitive) whose returns are page snapshots: Playwright MCP's
`browser_snapshot`, Chrome DevTools MCP's `take_snapshot`..."""
DEFAULT_CONSOLE_TOOLS: tuple[str, ...] = (
    "*console*",
    "*logs",
    "*_log",
    "bash",
    "shell",
    "execute*",
    "run_command",
    "run_shell*",
    "terminal*",
)
"""Tool-name patterns whose returns are console output or logs (`browser_console_messages`, `bash`...)."""
