"""`SentRequest` (what a session sent, as a prompt cache sees it) and the stable fingerprints it is compared by.

A provider caches the bytes it was sent, in order: tool definitions, instructions, then the messages. Two
requests share a cached prefix as far as those are identical, so each is reduced to a fingerprint of what is
sent (never of what is not: timestamps, ids, usage, metadata) and the fingerprints are chained, position by
position: equal chained fingerprints at a position mean equal prefixes up to it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pydantic_core
from pydantic_ai.messages import CachePoint, ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RequestUsage

from .._estimate import CHARS_PER_TOKEN, approx_message_tokens, estimate_text_tokens
from ._prompt_cache import Ttl

__all__ = ["SentRequest", "cache_points_ttl", "chain", "message_fingerprint", "sent_instructions", "tools_text"]

_SENT_FIELDS = ("part_kind", "content", "tool_name", "args", "tool_call_id", "signature")
"""What of a part reaches the provider (a part's timestamp, id and metadata never do)."""


@dataclass(frozen=True)
class SentRequest:
    """One request a session sent to a model, as a prompt cache sees it.

    Example:
        ```python
        request = SentRequest(messages, instructions='Be brief.', timestamp=datetime.now(UTC))
        ```
    """

    messages: Sequence[ModelMessage]
    """The messages sent (a processor's or the middleware's output: what the model saw)."""
    instructions: str | None = None
    """The request's instructions; `None` takes those of the latest `ModelRequest` (as pydantic-ai sends them)."""
    tool_definitions: Sequence[ToolDefinition] = ()
    timestamp: datetime | None = None
    """When it was sent; `None` means no time passed since the previous request (nothing expires)."""
    usage: RequestUsage | None = None
    """The provider's usage for this request, when it reported one: shown beside the simulator's prediction."""
    output_tokens: int | None = None
    """Output tokens, when `usage` is not given (else `usage.output_tokens`)."""
    model_name: str | None = None
    """`provider:model` the request went to (informational: the simulator prices with its own model)."""
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])


def sent_instructions(request: SentRequest) -> str:
    """The instructions the request carried: its own, else those of its latest `ModelRequest`."""
    if request.instructions is not None:
        return request.instructions
    for message in reversed(request.messages):
        if isinstance(message, ModelRequest):
            return message.instructions or ""
    return ""


def tools_text(tools: Sequence[ToolDefinition]) -> str:
    """The tool definitions as the text they are fingerprinted and counted by."""
    if not tools:
        return ""
    sent = [(t.name, t.description, t.parameters_json_schema, t.strict) for t in tools]
    return pydantic_core.to_json(sent, fallback=repr).decode()


def text_fingerprint(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def message_fingerprint(message: ModelMessage) -> bytes:
    """A stable fingerprint of what a message sends: its kind and each part's sent fields (content, tool name,
    arguments, call id, signature), never its timestamps, ids, usage or metadata."""
    sent = [message.kind, [[getattr(part, name, None) for name in _SENT_FIELDS] for part in message.parts]]
    data = pydantic_core.to_json(sent, bytes_mode="base64", fallback=repr)
    return hashlib.blake2b(data, digest_size=16).digest()


def chain(previous: bytes, fingerprint: bytes) -> bytes:
    """The fingerprint of a prefix extended by one more position."""
    return hashlib.blake2b(previous + fingerprint, digest_size=16).digest()


def message_tokens_sent(message: ModelMessage) -> int:
    """The project's approximate count of one message, without the request's instructions (sent once per
    request, with the head, not with every message that carries them)."""
    total = approx_message_tokens(message)
    if isinstance(message, ModelRequest) and message.instructions:
        total -= (len(message.instructions) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
    return total


def text_tokens(text: str) -> int:
    return estimate_text_tokens(text) if text else 0


def cache_points_ttl(message: ModelMessage) -> Ttl | None:
    """The longest TTL of the `CachePoint`s in a message's user prompts (`'1h'` beats `'5m'`), or `None`."""
    found: Ttl | None = None
    if isinstance(message, ModelRequest):
        for part in message.parts:
            if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
                for item in part.content:
                    if isinstance(item, CachePoint) and (found is None or item.ttl == "1h"):
                        found = item.ttl
    return found
