"""The one error the command line reports: a clear line on stderr and an exit status, never a traceback."""

from __future__ import annotations

__all__ = ["EXIT_ERROR", "EXIT_USAGE", "CliError"]

EXIT_ERROR = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A failure the user can act on: `str(error)` is the whole message (one line), `status` the exit status."""

    def __init__(self, message: str, status: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.status = status
