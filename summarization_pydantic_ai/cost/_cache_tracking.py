"""The cost middleware's prompt-cache view: one `CacheSimulator` per conversation and priced model, each request
billed through it and stamped on its response, and `CacheCollapse` judged by pydantic-ai's rule."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import ModelRequestContext

from .._cache_events import CacheCollapse, CollapseReason, is_collapse
from .._windows import is_offline_model
from ..cache import (
    AnthropicPromptCache,
    CachedRequest,
    CacheSimulator,
    PromptCache,
    SentRequest,
    cache_prices,
    prompt_cache_for,
)
from ._cache import CACHE_METADATA_KEY, cache_stamp

__all__ = ["CacheTrack", "CacheTracks"]

_MAX_CONVERSATIONS = 64


@dataclass(eq=False)
class CacheTrack:
    """One conversation's simulated cache for one model, and the prefix its requests established (pydantic-ai's
    mark: the largest read + write since the last collapse)."""

    simulator: CacheSimulator
    model: str
    established: int = 0

    def bill(self, request_context: ModelRequestContext, response: ModelResponse, *, reported: bool) -> CachedRequest:
        """Bill the request the response answers and write its figures on the response (`CACHE_METADATA_KEY`)."""
        request = SentRequest(
            request_context.messages,
            tool_definitions=request_context.model_request_parameters.function_tools,
            timestamp=response.timestamp,
            usage=response.usage if reported else None,
            output_tokens=response.usage.output_tokens,
        )
        result = self.simulator.add(request)
        response.metadata = {**(response.metadata or {}), CACHE_METADATA_KEY: cache_stamp(result, self.model)}
        return result

    def collapse(self, result: CachedRequest, processor: str) -> CacheCollapse | None:
        """A `CacheCollapse` when `result` read back far less than the established prefix; advances the mark."""
        read, written = result.cache_read_tokens, result.cache_write_tokens
        established = self.established
        collapsed = established > 0 and is_collapse(established, read)
        self.established = read + written if collapsed else max(established, read + written)
        if not collapsed:
            return None
        retention = self.simulator.cache.retention
        return CacheCollapse(
            processor,
            _reason(result, retention),
            established,
            read,
            established - read,
            result.source,
            self.model,
            result.changed_at,
            result.seconds_since_previous,
            retention.total_seconds() if retention is not None else None,
        )


def _reason(result: CachedRequest, retention: timedelta | None) -> CollapseReason:
    if result.source == "reported" and not result.cache_read_tokens and not result.cache_write_tokens:
        return "unreported"
    if result.changed_at is not None:
        return "compacted"
    if retention is None:
        return "unknown"
    idle = result.seconds_since_previous
    return "ttl_expired" if idle is not None and idle > retention.total_seconds() else "unexpected"


class CacheTracks:
    """The tracks of one middleware instance (shared by its runs), the most recent conversations first kept."""

    def __init__(self) -> None:
        self._tracks: OrderedDict[tuple[object, str], CacheTrack] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self, conversation: object, model: str, cache: PromptCache | None, settings: Mapping[str, Any] | None
    ) -> CacheTrack:
        key = (conversation, model)
        with self._lock:
            track = self._tracks.get(key)
            if track is None:
                cache = cache or _cache_for(model, settings)
                track = CacheTrack(CacheSimulator(cache, cache_prices(model), keep_results=False), model)
                self._tracks[key] = track
                while len(self._tracks) > _MAX_CONVERSATIONS:
                    self._tracks.popitem(last=False)
            self._tracks.move_to_end(key)
            return track


def _cache_for(model: str, settings: Mapping[str, Any] | None) -> PromptCache:
    """The family's cache; for Anthropic, the breakpoints the model settings ask pydantic-ai to place, when they
    ask for any (else automatic caching of the last message, what a cost-aware setup turns on)."""
    cache = prompt_cache_for(model)
    asks = settings is not None and any(str(key).startswith("anthropic_cache") or key == "cache" for key in settings)
    if isinstance(cache, AnthropicPromptCache) and asks:
        return AnthropicPromptCache.from_settings(settings, model=cache.model)
    return cache


def is_reported(model: str, response: ModelResponse, price_as: str | None) -> bool:
    """The response's usage is the provider's own: a provider answered (a scripted `FunctionModel` names none),
    it counted input, and the request is not priced as another model."""
    return (
        price_as is None
        and response.provider_name is not None
        and not is_offline_model(model)
        and response.usage.input_tokens > 0
    )
