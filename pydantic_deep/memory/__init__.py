"""Memory: a MEMORY.md file that outlives the message history, shown in the instructions and edited with tools.

```python
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from pydantic_deep.memory import AgentMemoryToolset

agent = Agent(TestModel(), capabilities=[AgentMemoryToolset()])  # without deps: .pydantic-deep/main/ under the cwd
```
"""

from ._storage import MemoryLocation
from ._toolset import (
    MAX_INSTRUCTION_CHARS,
    MAX_LINE_CHARS,
    MAX_READ_CHARS,
    MEMORY_FILE,
    READ_LIMIT,
    AgentMemoryToolset,
)

__all__ = [
    "MAX_INSTRUCTION_CHARS",
    "MAX_LINE_CHARS",
    "MAX_READ_CHARS",
    "MEMORY_FILE",
    "READ_LIMIT",
    "AgentMemoryToolset",
    "MemoryLocation",
]
