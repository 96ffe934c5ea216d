"""The search index of one `messages.json`: the engine's (`summarization_pydantic_ai.store.FileSearchIndex`), so
there is one index and one implementation for `JsonHistoryStore.search`, `pydantic-deep search` on files and these
tools. `SessionIndex` is its name here."""

from summarization_pydantic_ai.store import FileSearchIndex as SessionIndex
from summarization_pydantic_ai.store import Hit, IndexDiscardedError, Pending

from ..eviction._content import evicted_paths

__all__ = ["Hit", "IndexDiscardedError", "Pending", "SessionIndex", "evicted_paths"]
