"""`CostLedger`: prices requests as they come (or as a recorded history holds them) and keeps the totals.

One path for both: the middleware feeds it live, `session_costs` feeds it a recorded history. Each request is
counted once, by its message id (a history may hold a message twice: a store records new versions), and each
summarizer call once, by the id it was recorded with.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, cast

from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, ModelResponse
from pydantic_ai.usage import RequestUsage

from .._messages import SUMMARY_METADATA_KEY, get_message_id
from ._cache import CacheLedger, CacheStamp
from ._pricing import model_label, price_usage
from ._records import REQUEST_KIND_KEY, REQUEST_KINDS, SUMMARIZER_USAGE_KEY, RequestKind
from ._spend import CompactionSaving, CostTotals, Spend

__all__ = ["CostLedger", "Priced", "session_costs"]


@dataclass(frozen=True)
class Priced:
    """One request as the ledger counted it."""

    kind: RequestKind
    model: str
    """`provider:model`, as a user reads it."""
    spend: Spend


@dataclass
class _OpenSaving:
    summary_id: str | None
    tokens_removed: int
    later: Counter[tuple[str | None, str | None]] = field(default_factory=Counter[tuple[str | None, str | None]])


@dataclass
class CostLedger:
    """Running totals by kind; `totals()` is a `CostTotals` snapshot."""

    _spend: dict[RequestKind, Spend] = field(default_factory=lambda: {kind: Spend() for kind in REQUEST_KINDS})
    _seen: set[str] = field(default_factory=set[str])
    _savings: list[_OpenSaving] = field(default_factory=list[_OpenSaving])
    _unpriced: dict[str, None] = field(default_factory=dict[str, None])
    _cache: CacheLedger = field(default_factory=CacheLedger)
    warn_unpriced: bool = True
    """Log a warning the first time a model genai-prices does not know is priced (a listing of sessions keeps
    quiet: it reads what was spent, it does not run anything)."""

    def add_messages(self, messages: Iterable[ModelMessage]) -> list[Priced]:
        """Count every request of a history not counted yet: responses, and the summarizer calls of summaries."""
        priced: list[Priced] = []
        for message in messages:
            if isinstance(message, ModelResponse):
                one = self.add_response(message)
                if one is not None:
                    priced.append(one)
            else:
                priced.extend(self.add_summary(message))
        return priced

    def add_response(
        self, response: ModelResponse, kind: RequestKind | None = None, *, price_as: str | None = None
    ) -> Priced | None:
        """Count one model response (`None` if it was counted already); `price_as` prices it as another model."""
        if not self._first_time(get_message_id(response)):
            return None
        kind = kind or _response_kind(response)
        model, provider = (price_as, None) if price_as else (response.model_name, response.provider_name)
        for saving in self._savings:
            saving.later[(model, provider)] += 1
        if (stamp := CacheStamp.parse(response.metadata)) is not None:
            self._cache.add(stamp, response.usage.output_tokens)
        return self._add(kind, response.usage, model, provider)

    def add_summary(self, message: ModelRequest) -> list[Priced]:
        """Count the summarizer calls a summary records (`SUMMARIZER_USAGE_KEY`), and note what it removed."""
        priced: list[Priced] = []
        for part in message.parts:
            if not isinstance(part, CompactionPart) or not part.metadata:
                continue
            for call in _calls(part.metadata.get(SUMMARIZER_USAGE_KEY)):
                if self._first_time(_text(call.get("id"))):
                    usage = _usage(call)
                    priced.append(self._add("summarizer", usage, _text(call.get("model")), _text(call.get("provider"))))
            info = part.metadata.get(SUMMARY_METADATA_KEY)
            summary_id = get_message_id(message)
            if isinstance(info, dict) and self._first_time(f"compaction:{summary_id}" if summary_id else None):
                self._note_compaction(summary_id, cast("dict[str, Any]", info))
        return priced

    def skip(self, messages: Iterable[ModelMessage]) -> None:
        """Mark what `messages` hold as counted elsewhere (a run's incoming history belongs to the session, not
        the run): their ids, and their summaries' calls and compactions."""
        for message in messages:
            self._first_time(get_message_id(message))
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, CompactionPart) and part.metadata:
                        for call in _calls(part.metadata.get(SUMMARIZER_USAGE_KEY)):
                            self._first_time(_text(call.get("id")))
                        summary_id = get_message_id(message)
                        self._first_time(f"compaction:{summary_id}" if summary_id else None)

    def copy(self) -> CostLedger:
        """An independent copy: what a later run of the same session starts from."""
        savings = [replace(saving, later=Counter(saving.later)) for saving in self._savings]
        return CostLedger(
            dict(self._spend), set(self._seen), savings, dict(self._unpriced), self._cache.copy(), self.warn_unpriced
        )

    def totals(self) -> CostTotals:
        return CostTotals(
            agent=self._spend["agent"],
            summarizer=self._spend["summarizer"],
            overflow_retry=self._spend["overflow_retry"],
            savings=tuple(_saving(open_saving, self.warn_unpriced) for open_saving in self._savings),
            unpriced_models=tuple(self._unpriced),
            cache=self._cache.report(),
            reductions=self._cache.reductions(),
        )

    def _first_time(self, key: str | None) -> bool:
        if key is None:
            return True  # no id: nothing to recognise it by, counted as met
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def _add(self, kind: RequestKind, usage: RequestUsage, model: str | None, provider: str | None) -> Priced:
        cost = price_usage(usage, model, provider, warn=self.warn_unpriced)
        label = model_label(model, provider)
        if cost is None:
            self._unpriced[label] = None
        spend = Spend.of(usage, cost)
        self._spend[kind] = self._spend[kind] + spend
        return Priced(kind, label, spend)

    def _note_compaction(self, summary_id: str | None, info: dict[str, Any]) -> None:
        before, after = info.get("tokens_before"), info.get("tokens_after")
        if isinstance(before, int) and isinstance(after, int) and before > after:
            self._savings.append(_OpenSaving(summary_id, before - after))


def session_costs(messages: Iterable[ModelMessage]) -> CostTotals:
    """The spend a recorded history holds: every response's usage priced with genai-prices, and the summarizer
    calls its summaries record, each counted once.

    Pass every record to count the whole session (`await store.load_all()`, or a `messages.json` read with
    `read_records`): the working context alone (`store.load()`) has lost the requests its summaries replaced.

    Example:
        ```python
        totals = session_costs(await store.load_all())
        print(format_cost(totals), totals.total.total_tokens)
        ```
    """
    ledger = CostLedger()
    ledger.add_messages(messages)
    return ledger.totals()


def _response_kind(response: ModelResponse) -> RequestKind:
    kind = (response.metadata or {}).get(REQUEST_KIND_KEY)
    return kind if kind in REQUEST_KINDS else "agent"


def _calls(value: object) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [cast("dict[str, Any]", c) for c in cast("list[object]", value) if isinstance(c, dict)]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _usage(call: dict[str, Any]) -> RequestUsage:
    return RequestUsage(
        input_tokens=_count(call.get("input_tokens")),
        cache_read_tokens=_count(call.get("cache_read_tokens")),
        cache_write_tokens=_count(call.get("cache_write_tokens")),
        output_tokens=_count(call.get("output_tokens")),
    )


def _saving(saving: _OpenSaving, warn: bool) -> CompactionSaving:
    total: Decimal | None = Decimal(0)
    for (model, provider), count in saving.later.items():
        price = price_usage(RequestUsage(input_tokens=saving.tokens_removed), model, provider, warn=warn)
        total = None if price is None or total is None else total + price * count
    return CompactionSaving(saving.summary_id, saving.tokens_removed, saving.later.total(), total)
