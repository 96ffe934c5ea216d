"""Storage: where sessions live, selected by one URL (`file://`, `sqlite:///`, `postgresql://`).

```python
from pydantic_deep.storage import open_storage

storage = open_storage('sqlite:///agents.db')  # histories, memories and checkpoints in one file
```
"""

from ._file import FileMemoryStore
from ._protocols import CheckpointStore, MemoryStore, SessionMetadataStore, StorageError
from ._sqlite import SQLiteCheckpointStore, SQLiteMemoryStore, SQLiteSessionMetadataStore
from ._storage import STORE_ENV, MigrationReport, Storage, migrate, open_storage

__all__ = [
    "STORE_ENV",
    "CheckpointStore",
    "FileMemoryStore",
    "MemoryStore",
    "MigrationReport",
    "SQLiteCheckpointStore",
    "SQLiteMemoryStore",
    "SQLiteSessionMetadataStore",
    "SessionMetadataStore",
    "Storage",
    "StorageError",
    "migrate",
    "open_storage",
]
