"""Counters beyond the approximate one: usage-anchored, tokenizer-based and provider-exact."""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse

from ._cursor import CursorTable, HistoryCursor
from ._messages import summary_info, summary_part
from ._tokens import IncrementalCounter, RequestInfo, estimate_message_tokens

__all__ = ["ProviderTokenCounter", "TiktokenCounter", "UsageAnchoredCounter"]

logger = logging.getLogger("summarization_pydantic_ai")

_ANCHOR_SEARCH = 64
"""How far back from the end a response with reported usage is looked for."""


class _SummaryScan(HistoryCursor):
    """A cursor that also knows where the summaries of its history are, and when each was written."""

    __slots__ = ("summaries",)

    def __init__(self) -> None:
        super().__init__(fingerprint_all=False)  # never asked for `verify=True`
        self.summaries: dict[int, str] = {}
        """Index of each summary message -> its `created_at` ("9999" when unknown: never anchor across it)."""

    def latest(self) -> str | None:
        return self.summaries[max(self.summaries)] if self.summaries else None


def _summary_created(message: ModelMessage) -> str | None:
    if summary_part(message) is None:
        return None
    value = (summary_info(message) or {}).get("created_at")
    return value if isinstance(value, str) else "9999"


@dataclass(eq=False)
class UsageAnchoredCounter:
    """Exact `input_tokens + output_tokens` of the last `ModelResponse` plus an estimate of what came after it.

    The provider's own count of the conversation up to its last answer is the best measure there is; only the
    messages added since (tool results, a new prompt) are estimated. A response whose history was rewritten
    afterwards (a summary written after it now precedes it) is not used as an anchor. Without an anchor the
    whole history is estimated, plus the request's instructions and tools when known.

    Example:
        ```python
        processor = SummarizationProcessor(trigger=('tokens', 100_000), token_counter=UsageAnchoredCounter())
        ```
    """

    estimator: IncrementalCounter = field(default_factory=lambda: IncrementalCounter(estimate_message_tokens))
    _scans: CursorTable[_SummaryScan] = field(
        default_factory=lambda: CursorTable(32, factory=_SummaryScan), init=False, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __call__(self, messages: Sequence[ModelMessage]) -> int:
        anchored = self.anchored(messages)
        return anchored if anchored is not None else self.estimator.count(messages)

    async def count_request(
        self, messages: Sequence[ModelMessage], *, request: RequestInfo, threshold: int | None
    ) -> int:
        anchored = self.anchored(messages)
        if anchored is not None:
            return anchored
        return self.estimator.count(messages) + request.overhead_tokens

    def anchored(self, messages: Sequence[ModelMessage]) -> int | None:
        """The anchored measure, or `None` when no response in the last 64 messages can anchor it."""
        stop = max(0, len(messages) - _ANCHOR_SEARCH)
        for i in range(len(messages) - 1, stop - 1, -1):
            message = messages[i]
            if summary_part(message) is not None:
                return None
            if isinstance(message, ModelResponse) and message.usage.input_tokens > 0:
                created = self._latest_summary_created(messages)
                if created is not None and created > message.timestamp.isoformat():
                    return None
                measure = message.usage.input_tokens + message.usage.output_tokens
                return measure + sum(self.estimator.count_message(m) for m in messages[i + 1 :])
        return None

    def _latest_summary_created(self, messages: Sequence[ModelMessage]) -> str | None:
        """When the latest summary was written, scanning only what changed since the previous call."""
        with self._lock:
            scan = self._scans.cursor_for(messages)
            change = scan.peek(messages)
            if change.kind == "unchanged":
                return scan.latest()
            summaries = scan.summaries
            if change.kind == "replaced":
                for index in [i for i in summaries if i >= change.start]:
                    del summaries[index]
            for i in (*change.edited, *range(change.start, len(messages))):
                created = _summary_created(messages[i])
                if created is None:
                    summaries.pop(i, None)
                else:
                    summaries[i] = created
            scan.commit(messages, change)
            return scan.latest()


def _load_encoding(name: str) -> Callable[[str], int]:
    """A `text -> token count` function from `bpe_openai` (offline) or `tiktoken`, whichever is installed."""
    errors: list[str] = []
    for module_name in ("bpe_openai", "tiktoken"):
        try:
            module = importlib.import_module(module_name)
            encoding = module.get_encoding(name)
        except Exception as exc:  # an import error, or tiktoken failing to download its files
            errors.append(f"{module_name}: {exc}")
            continue
        return _chunked_encoder(encoding)
    raise RuntimeError(
        f"no tokenizer for encoding {name!r}; install the `tiktoken` extra "
        f"(`pip install 'summarization-pydantic-ai[tiktoken]'`). Tried: {'; '.join(errors)}"
    )


_ENCODE_CHUNK = 20_000


def _chunked_encoder(encoding: Any) -> Callable[[str], int]:
    def count(text: str) -> int:
        # bpe-openai refuses very long inputs; chunks at 20,000 characters change the count by a token or so.
        return sum(
            len(encoding.encode(text[i : i + _ENCODE_CHUNK], disallowed_special=()))
            for i in range(0, len(text), _ENCODE_CHUNK)
        )

    return count


@dataclass(eq=False)
class TiktokenCounter:
    """Counts with OpenAI's BPE encodings (`o200k_base` by default), cached per message like the approximate one.

    Uses `bpe-openai` (ships the encodings, works offline) or `tiktoken` if that is what is installed.
    Structure (message and part overhead, media) is estimated as in `count_tokens_approximately`.
    """

    encoding: str = "o200k_base"
    _counter: IncrementalCounter = field(init=False, repr=False)

    def __post_init__(self) -> None:
        text_tokens = _load_encoding(self.encoding)
        self._counter = IncrementalCounter(lambda message: estimate_message_tokens(message, text_tokens))

    def __call__(self, messages: Sequence[ModelMessage]) -> int:
        return self._counter.count(messages)


@dataclass(eq=False)
class ProviderTokenCounter:
    """Asks the provider (`Model.count_tokens`, a network call) for an exact count, but only near the trigger.

    Below `near * threshold` the cheap `estimator` answers. Models without `count_tokens` (and failed calls)
    fall back to the estimate, reported once in the log.
    """

    model: Any = None
    """The model to ask; `None` uses the request's model (capability form only)."""
    estimator: UsageAnchoredCounter = field(default_factory=UsageAnchoredCounter)
    near: float = 0.8
    _unsupported: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.near <= 1:
            raise ValueError(f"near must be in (0, 1], got {self.near!r}")

    def __call__(self, messages: Sequence[ModelMessage]) -> int:
        return self.estimator(messages)

    async def count_request(
        self, messages: Sequence[ModelMessage], *, request: RequestInfo, threshold: int | None
    ) -> int:
        estimate = await self.estimator.count_request(messages, request=request, threshold=threshold)
        model = self.model or request.model
        if self._unsupported or threshold is None or model is None or estimate < self.near * threshold:
            return estimate
        if request.model_request_parameters is None:
            return estimate
        try:
            usage = await model.count_tokens(list(messages), request.model_settings, request.model_request_parameters)
        except NotImplementedError:
            self._unsupported = True
            logger.warning("%s has no count_tokens; using the estimate", type(model).__name__)
            return estimate
        except Exception as exc:  # a network error must not stop the run
            logger.warning("count_tokens failed (%s); using the estimate", exc)
            return estimate
        return int(usage.input_tokens)
