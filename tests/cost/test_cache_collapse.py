"""`CacheCollapse` is judged as pydantic-ai judges it: the same thresholds, the same reasons."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic_ai._cache_health import MIN_MISSED_RATIO, MIN_MISSED_TOKENS  # pyright: ignore[reportPrivateUsage]

from summarization_pydantic_ai.cache import AnthropicPromptCache, CachedRequest, CacheSimulator, CacheTokens
from summarization_pydantic_ai.cost._cache_tracking import CacheTrack


def _request(read: int, write: int, **fields: object) -> CachedRequest:
    tokens = CacheTokens(read, write, 0)
    defaults: dict[str, object] = {"source": "estimated", "seconds_since_previous": 10.0}
    defaults.update(fields)
    return CachedRequest(0, read, write, 0, 0, None, predicted=tokens, predicted_cost_usd=None, **defaults)  # type: ignore[arg-type]


def _track() -> CacheTrack:
    return CacheTrack(CacheSimulator(AnthropicPromptCache(retention=timedelta(minutes=5))), "anthropic:claude")


def test_the_thresholds_are_pydantic_ais() -> None:
    assert (MIN_MISSED_TOKENS, MIN_MISSED_RATIO) == (2000, 0.05)
    track = _track()
    assert track.collapse(_request(0, 50_000), "cost") is None  # the first request establishes the prefix
    assert track.collapse(_request(48_001, 0), "cost") is None  # 1,999 missed: under 2,000 tokens
    assert track.collapse(_request(50_000, 1000), "cost") is None
    collapse = track.collapse(_request(40_000, 5000), "cost")
    assert collapse is not None and (collapse.established_tokens, collapse.missed_tokens) == (51_000, 11_000)
    assert track.established == 45_000  # re-baselined after a collapse, as pydantic-ai does


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"changed_at": 3}, "compacted"),
        ({"seconds_since_previous": 600.0}, "ttl_expired"),
        ({}, "unexpected"),
        ({"source": "reported"}, "unreported"),
    ],
)
def test_the_reasons(fields: dict[str, object], reason: str) -> None:
    track = _track()
    track.collapse(_request(0, 50_000), "cost")
    read, write = (0, 0) if reason == "unreported" else (1000, 1000)
    collapse = track.collapse(_request(read, write, **fields), "cost")
    assert collapse is not None and collapse.reason == reason


def test_no_retention_known_is_unknown() -> None:
    track = CacheTrack(CacheSimulator(AnthropicPromptCache(retention=None)), "anthropic:claude")
    track.collapse(_request(0, 50_000), "cost")
    collapse = track.collapse(_request(1000, 1000), "cost")
    assert collapse is not None and (collapse.reason, collapse.retention_seconds) == ("unknown", None)
