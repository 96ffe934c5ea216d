"""Sessions: every conversation of `create_deep_agent` lives in `<base_dir>/sessions/<id>/` — list, resume, fork,
delete them with `SessionManager`."""

from ._history import CorruptSessionError, ForkPointError, MessageNotFoundError
from ._info import SessionInfo
from ._manager import SessionExistsError, SessionInUseError, SessionManager, SessionNotFoundError

__all__ = [
    "CorruptSessionError",
    "ForkPointError",
    "MessageNotFoundError",
    "SessionExistsError",
    "SessionInUseError",
    "SessionInfo",
    "SessionManager",
    "SessionNotFoundError",
]
