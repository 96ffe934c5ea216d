"""Test helper: run a compaction path as if every result made the context smaller, to see what it would have
committed without the commit check (`_compaction.shrinks`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from unittest.mock import patch

from pydantic_ai.messages import ModelMessage

from summarization_pydantic_ai import count_tokens_approximately

_USERS = (
    "summarization_pydantic_ai.processors._summarization",
    "summarization_pydantic_ai.processors._sliding_window",
    "summarization_pydantic_ai.context_manager._compress",
    "summarization_pydantic_ai.phases._capability",
)


@contextmanager
def without_commit_check() -> Iterator[None]:
    """Within this block, every compaction path commits whatever it built."""
    with ExitStack() as stack:
        for module in _USERS:
            stack.enter_context(patch(f"{module}.shrinks", lambda before, after: True))
        yield


def tokens(messages: Sequence[ModelMessage]) -> int:
    return count_tokens_approximately(messages)
