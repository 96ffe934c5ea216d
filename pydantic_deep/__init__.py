"""pydantic_deep: the harness on top of the context engine.

`create_deep_agent` builds a pydantic-ai agent with file tools, todos, eviction of large tool outputs, and the
`ContextManagerMiddleware`, in a fixed order (the spine of the toolkit):

PatchToolCalls -> EvictionProcessor -> your processors -> ContextManagerMiddleware (persist, count, compress).

It imports `summarization_pydantic_ai`, never the reverse.
"""

from .agent import DEFAULT_INSTRUCTIONS, backend_memory_reader, create_deep_agent, session_messages_path
from .backends import (
    BackendError,
    BackendProtocol,
    CompositeBackend,
    EditError,
    FileInfo,
    GrepMatch,
    LocalBackend,
    PathEscapeError,
    StateBackend,
)
from .checkpoints import (
    Checkpoint,
    CheckpointError,
    CheckpointMiddleware,
    CheckpointNotFoundError,
    FileCheckpointStore,
    InvalidCheckpointIdError,
)
from .deps import DeepAgentDeps
from .eviction import EvictedOutputIndexer, EvictionPolicy, EvictionProcessor, RetentionPolicy
from .filesystem import FilesystemToolset
from .history_search import HistoryArchiveSearch
from .memory import AgentMemoryToolset
from .patch import INTERRUPTED_RESULT_CONTENT, PATCH_METADATA_KEY, PLACEHOLDER_PROMPT, PatchToolCalls
from .sessions import (
    CorruptSessionError,
    ForkPointError,
    MessageNotFoundError,
    SessionExistsError,
    SessionInfo,
    SessionInUseError,
    SessionManager,
    SessionNotFoundError,
)
from .todos import Todo, TodoCapability

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "INTERRUPTED_RESULT_CONTENT",
    "PATCH_METADATA_KEY",
    "PLACEHOLDER_PROMPT",
    "AgentMemoryToolset",
    "BackendError",
    "BackendProtocol",
    "Checkpoint",
    "CheckpointError",
    "CheckpointMiddleware",
    "CheckpointNotFoundError",
    "CompositeBackend",
    "CorruptSessionError",
    "DeepAgentDeps",
    "EditError",
    "EvictedOutputIndexer",
    "EvictionPolicy",
    "EvictionProcessor",
    "FileCheckpointStore",
    "FileInfo",
    "FilesystemToolset",
    "ForkPointError",
    "GrepMatch",
    "HistoryArchiveSearch",
    "InvalidCheckpointIdError",
    "LocalBackend",
    "MessageNotFoundError",
    "PatchToolCalls",
    "PathEscapeError",
    "RetentionPolicy",
    "SessionExistsError",
    "SessionInUseError",
    "SessionInfo",
    "SessionManager",
    "SessionNotFoundError",
    "StateBackend",
    "Todo",
    "TodoCapability",
    "backend_memory_reader",
    "create_deep_agent",
    "session_messages_path",
]
