"""The `pydantic-deep` command line: chat with a deep agent, list, show, search and export sessions, run the demo.

Needs the `cli` extra (`pip install "summarization-pydantic-ai[cli]"`: rich and prompt-toolkit).
"""

from __future__ import annotations

import importlib.util
import sys

__all__ = ["main"]

_EXTRA = ("rich", "prompt_toolkit")


def main(argv: list[str] | None = None) -> int:
    """Run `pydantic-deep` with `argv` (default: `sys.argv[1:]`); returns the exit status."""
    missing = [name for name in _EXTRA if importlib.util.find_spec(name) is None]
    if missing:  # the cli extra is not installed: say how to get it, not a traceback
        print(
            f"pydantic-deep: {' and '.join(missing)} not installed; install the cli extra: "
            'pip install "summarization-pydantic-ai[cli]"',
            file=sys.stderr,
        )
        return 2
    from ._app import run

    return run(sys.argv[1:] if argv is None else argv)
