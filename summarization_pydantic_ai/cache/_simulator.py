"""`CacheSimulator`: what each request of a session read from the provider's prompt cache, wrote to it, sent
uncached, and what it cost.

Requests are compared position by position (tool definitions, instructions, then each message's sent form, by a
chained fingerprint). A request reads the longest live entry its provider family finds, and writes (or sends
uncached) the rest. `add` costs O(messages after the first one that changed since the previous request): O(new
messages) for a growing conversation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TypeAlias

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.tools import ToolDefinition

from .._cursor import HistoryCursor
from ._billed import CachedRequest, CacheTokens
from ._entries import CacheEntries, Entry, Line
from ._prices import CachePrices, cache_prices, rewrite_cost
from ._prompt_cache import FIRST_MESSAGE, INSTRUCTIONS, TOOLS, Layout, PromptCache, Ttl
from ._providers import prompt_cache_for
from ._report import CacheReport
from ._request import (
    SentRequest,
    cache_points_ttl,
    chain,
    message_fingerprint,
    message_tokens_sent,
    sent_instructions,
    text_fingerprint,
    text_tokens,
    tools_text,
)
from ._rewrites import PreviousRequest, Rewrite

__all__ = ["CacheSimulator", "CacheTokens", "CachedRequest"]

_ROOT = b"\0" * 16
_Tip: TypeAlias = tuple[Line, int, bytes]
_PRUNE_SLACK = 1024


@dataclass
class CacheSimulator:
    """Replays a session's requests through a provider family's prompt cache.

    Example:
        ```python
        simulator = CacheSimulator.for_model('anthropic:claude-sonnet-4-5')
        for request in simulator.simulate(requests):
            print(request.cache_read_tokens, request.cache_write_tokens, request.cost_usd)
        ```
    """

    cache: PromptCache
    prices: CachePrices | None = None
    message_tokens: Callable[[ModelMessage], int] = message_tokens_sent
    """Tokens of one message as sent (default: the project's approximate count, instructions excluded)."""
    text_tokens: Callable[[str], int] = text_tokens
    """Tokens of the instructions and of the tool definitions' JSON."""
    keep_results: bool = True
    """Keep every `CachedRequest` for `requests` and `report()`; `False` for a long-lived simulator that only
    needs each result as it comes (the cost middleware's: the figures live on the responses)."""
    _entries: CacheEntries = field(default_factory=CacheEntries, init=False, repr=False)
    _cursor: HistoryCursor = field(default_factory=lambda: HistoryCursor(fingerprint_all=False), init=False)
    _hashes: list[bytes] = field(default_factory=list[bytes], init=False, repr=False)
    _fps: list[bytes] = field(default_factory=list[bytes], init=False, repr=False)
    _cum_tokens: list[int] = field(default_factory=list[int], init=False, repr=False)
    _cum_blocks: list[int] = field(default_factory=list[int], init=False, repr=False)
    _points: dict[int, Ttl] = field(default_factory=dict[int, Ttl], init=False, repr=False)
    _tools: tuple[Sequence[ToolDefinition], list[ToolDefinition]] | None = field(default=None, init=False, repr=False)
    _instructions: str | None = field(default=None, init=False, repr=False)
    _now: float | None = field(default=None, init=False, repr=False)
    _tip: _Tip | None = field(default=None, init=False, repr=False)
    """The line and position of the last entry the previous request left, and its key."""
    _established: int = field(default=0, init=False, repr=False)
    _requests: list[CachedRequest] = field(default_factory=list[CachedRequest], init=False, repr=False)
    _count: int = field(default=0, init=False, repr=False)

    @classmethod
    def for_model(cls, model_name: str, **options: object) -> CacheSimulator:
        """A simulator with the model's family cache (`prompt_cache_for`) and its genai-prices prices."""
        return cls(prompt_cache_for(model_name, **options), cache_prices(model_name))

    @property
    def requests(self) -> list[CachedRequest]:
        """Every request added so far (none kept with `keep_results=False`)."""
        return list(self._requests)

    def simulate(self, requests: Iterable[SentRequest]) -> list[CachedRequest]:
        """`add` each request in order (continuing this simulator's cache) and return their results."""
        return [self.add(request) for request in requests]

    def add(self, request: SentRequest) -> CachedRequest:
        """Bill one more request against the cache the earlier ones left, and update it."""
        now = request.timestamp.timestamp() if request.timestamp is not None else self._now
        since = None if now is None or self._now is None else now - self._now
        clock = now if now is not None else 0.0
        previous_tip = self._tip
        before = self._update_layout(request)
        layout = Layout(self._cum_tokens, self._cum_blocks, self._points)
        if self.cache.persists_response_end:
            self._persist_response_end(request.messages, before.first, previous_tip)
        warm = previous_tip is not None and self._entries.alive(previous_tip[2], clock) is not None
        read = self._find_read(layout, clock)
        predicted, write_1h, last_written = self._bill(layout, read, clock)
        if self.cache.persists_common_prefix:
            self._persist_common_prefix(before.first, clock, previous_tip)
        rewrite = before.rewrite(self._fps, self._cum_tokens, predicted.cache_read_tokens, self._established, warm)
        result = self._result(request, predicted, write_1h, rewrite, since, warm)
        self._established = layout.cum_tokens[last_written] if last_written >= 0 else 0
        self._now = now
        self._count += 1
        if self.keep_results:
            self._requests.append(result)
        if len(self._entries.entries) > 2 * len(self._hashes) + _PRUNE_SLACK:
            self._entries.prune(clock)  # amortized: at most once per that many new entries
        return result

    def report(self) -> CacheReport:
        """Totals over every request added so far (kept with `keep_results=True`, the default)."""
        return CacheReport.of(self._requests)

    def tokens_after(self, index: int) -> int:
        """Tokens of the latest request's messages from message `index` on (what a rewrite there re-sends)."""
        messages = len(self._cum_tokens) - FIRST_MESSAGE
        if not 0 <= index <= messages:
            raise IndexError(f"message index {index} is outside the latest request's {messages} messages")
        before = self._cum_tokens[FIRST_MESSAGE + index - 1]
        return self._cum_tokens[-1] - before

    def rewrite_cost_at(self, index: int) -> Decimal | None:
        """What a rewrite at message `index` of the latest request adds to the next request's bill, in USD
        (`None` when the model is unpriced): the tokens after it, written again instead of read."""
        if self.prices is None:
            return None
        return rewrite_cost(self.prices, self.tokens_after(index), write_premium=self.cache.write_premium)

    # -- layout ----------------------------------------------------------------------------------------------

    def _update_layout(self, request: SentRequest) -> PreviousRequest:
        """Bring the positions up to `request`; returns what the previous request had from the first position
        that may differ (by identity) on."""
        messages = request.messages
        change = self._cursor.advance(messages)
        first = FIRST_MESSAGE + (min(change.edited) if change.edited else change.start)
        instructions = sent_instructions(request)
        if self._instructions != instructions:
            first = INSTRUCTIONS
        if not self._same_tools(request.tool_definitions):
            first = TOOLS
        first = min(first, len(self._hashes))
        before = PreviousRequest.cut(self._hashes, self._fps, self._cum_tokens, first)
        del self._hashes[first:], self._fps[first:], self._cum_tokens[first:], self._cum_blocks[first:]
        for position in [p for p in self._points if p >= first]:
            del self._points[position]
        if first <= TOOLS:
            text = tools_text(request.tool_definitions)
            self._push(text_fingerprint(text), self.text_tokens(text), 1 if text else 0)
        if first <= INSTRUCTIONS:
            self._instructions = instructions
            self._push(text_fingerprint(instructions), self.text_tokens(instructions), 1 if instructions else 0)
        for message in messages[len(self._hashes) - FIRST_MESSAGE :]:
            if (ttl := cache_points_ttl(message)) is not None:
                self._points[len(self._hashes)] = ttl
            self._push(message_fingerprint(message), self.message_tokens(message), max(1, len(message.parts)))
        before.settle(self._hashes)
        return before

    def _push(self, fingerprint: bytes, tokens: int, blocks: int) -> None:
        previous = self._hashes[-1] if self._hashes else _ROOT
        self._fps.append(fingerprint)
        self._hashes.append(chain(previous, fingerprint))
        self._cum_tokens.append((self._cum_tokens[-1] if self._cum_tokens else 0) + tokens)
        self._cum_blocks.append((self._cum_blocks[-1] if self._cum_blocks else 0) + blocks)

    def _same_tools(self, tools: Sequence[ToolDefinition]) -> bool:
        known = self._tools
        same = known is not None and (
            tools is known[0]
            or (len(tools) == len(known[1]) and all(a is b for a, b in zip(tools, known[1], strict=True)))
        )
        if not same:
            same = known is not None and tools_text(tools) == tools_text(known[1])
            self._tools = (tools, list(tools))
        return same

    # -- the cache -------------------------------------------------------------------------------------------

    def _find_read(self, layout: Layout, now: float) -> Entry | None:
        """The longest live entry found walking back from each read point (within the family's lookback)."""
        best: Entry | None = None
        lookback, blocks, hashes, entries = self.cache.lookback_blocks, layout.cum_blocks, self._hashes, self._entries
        for point in self.cache.read_points(layout):
            position = point
            while position >= 0 and (best is None or position > best.position):
                if lookback is not None and blocks[point] - blocks[position] > lookback:
                    break
                entry = entries.alive(hashes[position], now)
                if entry is not None:
                    best = entry
                    break
                position -= 1
        return best

    def _bill(self, layout: Layout, read: Entry | None, now: float) -> tuple[CacheTokens, int, int]:
        """The request's read / written / uncached tokens; writes its entries and refreshes what it read.
        Returns the tokens, the 1-hour writes among them, and the last position the cache now holds."""
        cache, cum = self.cache, layout.cum_tokens
        read_position = read.position if read is not None else -1
        read_tokens = cache.readable(cum[read_position]) if read is not None else 0
        points: list[tuple[int, Ttl | None]] = [
            (p, ttl)
            for p, ttl in cache.write_points(layout)
            if p > read_position and cum[p] >= cache.min_cacheable_tokens and cum[p] > 0
        ]
        written = write_1h = 0
        if cache.write_premium:
            previous = cum[read_position] if read is not None else 0
            for position, ttl in points:
                segment = cum[position] - previous
                written += segment
                write_1h += segment if ttl == "1h" else 0
                previous = cum[position]
        line = self._entries.line_after(read)
        for position, ttl in points:
            self._entries.write(self._hashes[position], cum[position], line, position, cache.ttl(ttl))
        if read is not None:
            self._entries.refresh(read, now)
        last = points[-1][0] if points else read_position
        if points:
            line.refresh(now, last)
            self._tip = (line, last, self._hashes[last])
        elif read is not None:
            self._tip = (read.line, read_position, self._hashes[read_position])
        else:
            self._tip = None
        return CacheTokens(read_tokens, written, layout.total - read_tokens - written), write_1h, last

    def _persist_response_end(self, messages: Sequence[ModelMessage], first: int, previous: _Tip | None) -> None:
        """DeepSeek keeps the end of each request's output as an entry: the request that repeats it reads it."""
        if previous is None:
            return
        line, tip, _ = previous
        after = tip + 1
        index = after - FIRST_MESSAGE
        if first > tip and 0 <= index < len(messages) and isinstance(messages[index], ModelResponse):
            entry = self._entries.entries.get(self._hashes[tip])
            if entry is not None and entry.line is line:
                self._entries.write(self._hashes[after], self._cum_tokens[after], line, after, self.cache.retention)
                line.refresh(self._now or 0.0, after)  # persisted when the output ended: the previous request

    def _persist_common_prefix(self, first: int, now: float, previous: _Tip | None) -> None:
        """DeepSeek keeps a prefix two requests were seen to share as an entry of its own (for later ones)."""
        common = first - 1
        if previous is None or common < 0 or common >= previous[1]:
            return
        if self._entries.alive(self._hashes[common], now) is None:
            line = previous[0].holding(common)
            self._entries.write(self._hashes[common], self._cum_tokens[common], line, common, self.cache.retention)
            line.refresh(now, common)

    # -- results ---------------------------------------------------------------------------------------------

    def _result(
        self,
        request: SentRequest,
        predicted: CacheTokens,
        write_1h: int,
        rewrite: Rewrite | None,
        since: float | None,
        warm: bool,
    ) -> CachedRequest:
        usage = request.usage
        output = usage.output_tokens if usage is not None else (request.output_tokens or 0)
        predicted_cost = self._cost(predicted, output, write_1h)
        reported = None
        if usage is not None and usage.input_tokens > 0:
            read, write = usage.cache_read_tokens, usage.cache_write_tokens
            reported = CacheTokens(read, write, max(0, usage.input_tokens - read - write))
        shown = reported or predicted
        return CachedRequest(
            index=self._count,
            cache_read_tokens=shown.cache_read_tokens,
            cache_write_tokens=shown.cache_write_tokens,
            uncached_tokens=shown.uncached_tokens,
            output_tokens=output,
            cost_usd=self._cost(reported, output, 0) if reported is not None else predicted_cost,
            source="reported" if reported is not None else "estimated",
            predicted=predicted,
            predicted_cost_usd=predicted_cost,
            reported=reported,
            established_tokens=self._established,
            changed_at=rewrite.changed_at if rewrite is not None else None,
            tokens_removed=rewrite.tokens_removed if rewrite is not None else 0,
            rewrite_tokens=rewrite.rewrite_tokens if rewrite is not None else 0,
            seconds_since_previous=since,
            cache_write_1h_tokens=write_1h,
            warm=warm,
        )

    def _cost(self, tokens: CacheTokens, output: int, write_1h: int) -> Decimal | None:
        if self.prices is None:
            return None
        return self.prices.cost(
            uncached=tokens.uncached_tokens,
            cache_read=tokens.cache_read_tokens,
            cache_write=tokens.cache_write_tokens - write_1h,
            cache_write_1h=write_1h,
            output=output,
        )
