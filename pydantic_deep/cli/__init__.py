"""The `pydantic-deep` command line: chat with a deep agent, list, show, search and export sessions, run the demo.

Needs the `cli` extra (`pip install "summarization-pydantic-ai[cli]"`: rich and prompt-toolkit).
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run `pydantic-deep` with `argv` (default: `sys.argv[1:]`); returns the exit status."""
    try:
        from ._app import run
    except ImportError as exc:  # the cli extra is missing: say how to get it, not a traceback
        missing = exc.name or str(exc)
        print(
            f"pydantic-deep: {missing} is not installed; install the cli extra: "
            'pip install "summarization-pydantic-ai[cli]"',
            file=sys.stderr,
        )
        return 2
    return run(sys.argv[1:] if argv is None else argv)
