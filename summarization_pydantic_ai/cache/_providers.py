"""How each provider family caches a request: where entries are written, where reads are looked for, how long
they live, the smallest prefix it caches, and whether a write costs a premium.

The request's positions and the base model (`PromptCache`, `NoPromptCache`) are in `_prompt_cache`.

Sources (the providers' published rules, 2026): Anthropic's prompt-caching guide (breakpoints, automatic
caching of the last block, the ~20-block lookback, 5-minute and 1-hour TTLs at 1.25x and 2x, reads at 0.1x,
minimum cacheable lengths per model), OpenAI's (automatic above 1,024 tokens, hits in 128-token steps, no write
fee), Gemini's implicit caching (on by default for 2.5 and newer, minimum per model), DeepSeek's context caching
on disk (prefix units at each request's end and its output's end, common prefixes persisted, no write fee).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, cast

from .._windows import PROVIDER_ALIASES
from ._prompt_cache import INSTRUCTIONS, TOOLS, TTLS, CacheFamily, Layout, NoPromptCache, PromptCache, Ttl

__all__ = [
    "AnthropicPromptCache",
    "DeepSeekPromptCache",
    "GooglePromptCache",
    "OpenAIPromptCache",
    "prompt_cache_for",
]


def _anthropic_minimum(model: str | None) -> int:
    """The minimum cacheable prompt length Anthropic lists for a model (1,024 where it lists none)."""
    name = (model or "").lower()
    for pattern, minimum in _ANTHROPIC_MINIMUMS:
        if re.search(pattern, name):
            return minimum
    return 1024


_ANTHROPIC_MINIMUMS: tuple[tuple[str, int], ...] = (
    (r"opus-5|fable-5|mythos-5", 512),
    (r"opus-4-?[56]\b|opus-4[.-][56]|haiku-4", 4096),
    (r"opus-4[.-]7", 2048),
    (r"haiku-3|3-haiku|3-5-haiku", 2048),
)


@dataclass(frozen=True)
class AnthropicPromptCache(PromptCache):
    """Anthropic: explicit breakpoints (`cache_control`), written at 1.25x (5 minutes) or 2x (1 hour) the input
    price and read at 0.1x.

    The breakpoints are pydantic-ai's: `cache_messages` is the automatic one on the last message
    (`anthropic_cache` / `anthropic_cache_messages`), `cache_instructions` and `cache_tool_definitions` mark the
    end of the instructions and of the tools, and every `CachePoint` in a user prompt marks its message. At
    most `max_breakpoints` are placed (the last message's first, then the head's, then the latest cache points).
    A request reads the longest entry found walking back at most `lookback_blocks` content blocks from a
    breakpoint: a rewrite further back than that from the last message misses everything but the head.

    Example:
        ```python
        cache = AnthropicPromptCache(model='claude-sonnet-4-5', cache_instructions=True)
        ```
    """

    family: ClassVar[CacheFamily] = "anthropic"
    write_premium: bool = True
    lookback_blocks: int | None = 20
    model: str | None = None
    retention: timedelta | None = timedelta(minutes=5)
    min_cacheable_tokens: int = -1
    """-1: the model's published minimum (4,096 for Opus 4.5/4.6 and Haiku 4.5, 2,048 for Opus 4.7 and Haiku 3,
    512 for the 5 family, 1,024 otherwise)."""
    ttl_messages: Ttl = "5m"
    cache_messages: bool = True
    cache_instructions: bool | Ttl = False
    cache_tool_definitions: bool | Ttl = False
    max_breakpoints: int = 4

    def __post_init__(self) -> None:
        if self.min_cacheable_tokens < 0:
            object.__setattr__(self, "min_cacheable_tokens", _anthropic_minimum(self.model))
        if self.max_breakpoints < 1:
            raise ValueError(f"max_breakpoints must be at least 1, got {self.max_breakpoints}")

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None, *, model: str | None = None) -> AnthropicPromptCache:
        """The breakpoints pydantic-ai places for these model settings: `anthropic_cache` /
        `anthropic_cache_messages` (the last message), `anthropic_cache_instructions`,
        `anthropic_cache_tool_definitions`, or else the unified `cache` setting (instructions and tools, and the
        conversation unless `{'messages': False}`). No cache setting at all: nothing is cached."""
        settings = settings or {}
        if not any(str(key).startswith("anthropic_cache") for key in settings):
            return cls._from_unified(settings.get("cache"), model)
        last = settings.get("anthropic_cache") or settings.get("anthropic_cache_messages") or False
        return cls(
            model=model,
            cache_messages=bool(last),
            ttl_messages=last if last in TTLS else "5m",
            cache_instructions=settings.get("anthropic_cache_instructions") or False,
            cache_tool_definitions=settings.get("anthropic_cache_tool_definitions") or False,
        )

    @classmethod
    def _from_unified(cls, value: object, model: str | None) -> AnthropicPromptCache:
        if not value:
            return cls(model=model, cache_messages=False)
        config = cast("dict[str, Any]", value) if isinstance(value, dict) else {}
        retention = config.get("retention", value)
        ttl: Ttl = retention if retention in TTLS else "5m"
        head: Ttl = ttl
        return cls(
            model=model,
            cache_messages=bool(config.get("messages", True)),
            ttl_messages=ttl,
            cache_instructions=head,
            cache_tool_definitions=head,
        )

    def write_points(self, layout: Layout) -> list[tuple[int, Ttl | None]]:
        if not layout.cum_tokens:
            return []
        chosen: dict[int, Ttl] = {}
        if self.cache_messages:
            chosen[layout.last] = self.ttl_messages
        for position, setting in ((TOOLS, self.cache_tool_definitions), (INSTRUCTIONS, self.cache_instructions)):
            if setting and position <= layout.last and len(chosen) < self.max_breakpoints:
                chosen.setdefault(position, setting if setting in TTLS else "5m")  # type: ignore[arg-type]
        for position in sorted(layout.cache_points, reverse=True):
            if len(chosen) >= self.max_breakpoints:
                break
            chosen.setdefault(position, layout.cache_points[position])
        return sorted(chosen.items())

    def read_points(self, layout: Layout) -> list[int]:
        return [position for position, _ in self.write_points(layout)]


@dataclass(frozen=True)
class OpenAIPromptCache(PromptCache):
    """OpenAI: automatic prefix caching of prompts of 1,024 tokens or more, hits in steps of 128 tokens
    (1,024, 1,152, 1,280, ...), no write fee; reads at the model's cached-input price.

    `retention` defaults to 10 minutes: OpenAI keeps an in-memory prefix 5 to 10 minutes after its last use
    (up to an hour off-peak; the extended 24-hour retention is asked for per request)."""

    family: ClassVar[CacheFamily] = "openai"
    retention: timedelta | None = timedelta(minutes=10)
    min_cacheable_tokens: int = 1024
    step_tokens: int = 128

    def readable(self, prefix_tokens: int) -> int:
        if prefix_tokens < self.min_cacheable_tokens:
            return 0
        return self.min_cacheable_tokens + (prefix_tokens - self.min_cacheable_tokens) // self.step_tokens * (
            self.step_tokens
        )


def _gemini_minimum(model: str | None) -> int:
    name = (model or "").lower()
    return 2048 if "2.5" in name else 4096


@dataclass(frozen=True)
class GooglePromptCache(PromptCache):
    """Google Gemini: implicit prefix caching (Gemini 2.5 and newer, on by default), no write fee; reads at the
    model's cached-input price. Minimum 2,048 tokens on 2.5 models, 4,096 on later ones (Google's table).

    Google publishes no retention for implicit caching: `retention` defaults to 5 minutes, an assumption."""

    family: ClassVar[CacheFamily] = "google"
    model: str | None = None
    retention: timedelta | None = timedelta(minutes=5)
    min_cacheable_tokens: int = -1

    def __post_init__(self) -> None:
        if self.min_cacheable_tokens < 0:
            object.__setattr__(self, "min_cacheable_tokens", _gemini_minimum(self.model))


@dataclass(frozen=True)
class DeepSeekPromptCache(PromptCache):
    """DeepSeek: context caching on disk, no write fee, hits at the cheaper cache-hit price. A request reads
    only a whole earlier *prefix unit*: the end of an earlier request's input, the end of its output (the next
    request repeats it), or a prefix two earlier requests were seen to share.

    DeepSeek says unused entries are cleared "within a few hours to a few days": `retention` defaults to
    1 hour, the cautious end."""

    family: ClassVar[CacheFamily] = "deepseek"
    retention: timedelta | None = timedelta(hours=1)
    persists_common_prefix: ClassVar[bool] = True
    persists_response_end: ClassVar[bool] = True

    def write_points(self, layout: Layout) -> list[tuple[int, Ttl | None]]:
        return [(layout.last, None)] if layout.cum_tokens else []


_FAMILY_PREFIXES: tuple[tuple[str, CacheFamily], ...] = (
    ("claude", "anthropic"),
    ("anthropic", "anthropic"),
    ("gpt", "openai"),
    ("chatgpt", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("codex", "openai"),
    ("gemini", "google"),
    ("deepseek", "deepseek"),
)
_PROVIDER_FAMILIES: dict[str, CacheFamily] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "azure": "openai",
    "google": "google",
    "deepseek": "deepseek",
}


def family_of(model_name: str) -> CacheFamily:
    """The cache family of `provider:model` (or a bare model name); `'none'` for one not modelled."""
    provider, sep, model = model_name.lower().partition(":")
    if not sep:
        provider, model = "", provider
    model = model.rsplit("/", 1)[-1]  # 'anthropic/claude-...' through a gateway, 'us.anthropic.claude-...'
    model = model.split(".")[-1] if model.startswith(("us.", "eu.", "apac.", "global.")) else model
    for prefix, family in _FAMILY_PREFIXES:
        if model.startswith(prefix) or f".{prefix}" in model:
            return family
    return _PROVIDER_FAMILIES.get(PROVIDER_ALIASES.get(provider, provider), "none")


def prompt_cache_for(model_name: str, **options: Any) -> PromptCache:
    """The prompt-cache model of a model's provider family, with its published defaults (`options` override
    them: `prompt_cache_for('anthropic:claude-sonnet-4-5', ttl_messages='1h')`).

    Example:
        ```python
        prompt_cache_for('openai:gpt-4.1')  # OpenAIPromptCache(retention=timedelta(minutes=10), ...)
        ```
    """
    family = family_of(model_name)
    model = model_name.partition(":")[2] or model_name
    if family == "anthropic":
        return AnthropicPromptCache(model=model, **options)
    if family == "google":
        return GooglePromptCache(model=model, **options)
    cls = {"openai": OpenAIPromptCache, "deepseek": DeepSeekPromptCache}.get(family, NoPromptCache)
    return cls(**options)
