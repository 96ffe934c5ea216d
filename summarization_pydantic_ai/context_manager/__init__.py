"""`ContextManagerMiddleware`: the history store, token accounting and compression in one capability."""

from ._capability import ContextManagerMiddleware
from ._state import ContextUsage
from ._truncate import Truncation, truncate_output, truncate_text

__all__ = ["ContextManagerMiddleware", "ContextUsage", "Truncation", "truncate_output", "truncate_text"]
