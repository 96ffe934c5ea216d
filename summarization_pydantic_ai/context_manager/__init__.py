"""`ContextManagerMiddleware`: the history store, token accounting and compression in one capability."""

from ._agent_driven import AgentDrivenCompression
from ._agent_request import DEFAULT_COMPRESSION_REQUEST
from ._capability import ContextManagerMiddleware
from ._memory_file import MemoryReader
from ._state import ContextUsage
from ._truncate import Truncation, truncate_output, truncate_text

__all__ = [
    "DEFAULT_COMPRESSION_REQUEST",
    "AgentDrivenCompression",
    "ContextManagerMiddleware",
    "ContextUsage",
    "MemoryReader",
    "Truncation",
    "truncate_output",
    "truncate_text",
]
