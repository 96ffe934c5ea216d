"""Hypothesis strategies for valid pydantic-ai histories, shaped the way a real agent run writes them.

A history is a head (an optional system prompt, alone in the first request or together with the first user
prompt), optionally a summary where a compaction would have put it, then turns. A turn is a user prompt and
a chain of tool steps (a response with one or several parallel calls, then one request holding the results
of *all* of them, with any outcome) closed by a final text response. Retried calls are called again in the
next response. The last turn of a `for_request=True` history is unfinished: it ends with the new user prompt
or with pending tool results (the in-flight exchange); a `for_request=False` history ends with the final
response of a finished run.

Every history drawn here passes `validate_history(h, for_request=...) == []` (tests/property asserts it).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from hypothesis import strategies as st
from pydantic_ai.messages import (
    BinaryContent,
    CompactionPart,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    NativeToolCallPart,
    NativeToolReturnPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from summarization_pydantic_ai import (
    MESSAGE_ID_KEY,
    SUMMARY_METADATA_KEY,
    IncrementalCounter,
    count_tokens_approximately,
    estimate_message_tokens,
)

__all__ = [
    "COUNTERS",
    "OUTCOMES",
    "TOOL_NAMES",
    "clear_tool_results_configs",
    "damaged_histories",
    "histories",
    "histories_with_faults",
    "keeps",
    "limit_warner_configs",
    "sliding_window_configs",
    "summarization_configs",
    "triggers",
]

TOOL_NAMES = ("read_file", "grep", "run_tests", "write_file", "search_docs")
OUTCOMES = ("success", "failed", "retried", "interrupted", "denied")
_SUMMARY_KINDS = st.sampled_from(("plain", "ours", "window"))
_SUMMARY_TEXTS = st.sampled_from(("## Intent\n- fix the parser", "Earlier: the user asked for {x}."))
# Tool-name tuples and outcome tuples are drawn as one choice each (see `_Shape` below for why).
_SOME_TOOLS = st.sampled_from([names for k in (1, 2, 3) for names in itertools.product(TOOL_NAMES, repeat=k)])
_MORE_TOOLS = st.sampled_from([names for k in (0, 1, 2) for names in itertools.product(TOOL_NAMES, repeat=k)])


@functools.cache
def _outcomes(calls: int) -> st.SearchStrategy[tuple[str, ...]]:
    """Outcomes for `calls` parallel calls: all succeed half the time (and that is what a failure shrinks to)."""
    mixed = list(itertools.product(OUTCOMES, repeat=calls))
    return st.sampled_from([("success",) * calls] * len(mixed) + mixed)


_SENTENCES = (
    "Please fix the failing test in src/app/models.py",
    "Refactor the parser; keep the public API.",
    "What does {this} do? Use `{braces}` and {0} carefully.",
    "TODO: add docs for ./docs/index.md",
    "Next: run the whole suite again",
    "- [ ] update CHANGELOG.md",
    "Traceback (most recent call last): ValueError: bad input",
    "Done. All 42 tests pass.",
    "See https://example.com/spec#section-2 for details",
    "ok",
    "",
)
_SYSTEM_PROMPTS = ("You are a careful coding assistant.", "Answer briefly.", "Never invent file paths.")


@functools.cache
def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    """Strategies are built once: hypothesis validates each new strategy object, which dominates draw time."""
    return st.integers(low, high)


def _fresh(value: Any) -> Any:
    """A new copy of a pooled value, so no two parts share a mutable object."""
    return copy.deepcopy(value)


# Content comes from pools (one choice per draw): hypothesis spends its time per choice, and arbitrary text or
# nested collections cost one choice per character or element. Lengths vary widely so token triggers fire.
_REPEATS = (1, 1, 1, 2, 5, 20, 60, 150, 400)
_TEXTS = tuple((s + " ") * k if k > 1 else s for s in _SENTENCES for k in _REPEATS)
_MEDIA = (
    ImageUrl(url="https://example.com/img/cat.png"),
    BinaryContent(data=b"\x89PNG0000", media_type="image/png"),
    DocumentUrl(url="https://example.com/doc/spec.pdf"),
)
_TOOL_DATA: tuple[Any, ...] = (
    {"path": "src/app/models.py", "lines": 120},
    {"ok": False, "error": "Traceback (most recent call last): KeyError: 'x'"},
    {"matches": ["src/a.py:1: import os", "src/b.py:7: {not a format}"], "count": 2},
    {},
    [1, 2, "three", None, True],
    [{"path": "docs/index.md"}, {"path": "README.md"}],
    [],
    {"content": "x" * 3_000},
)
_ARGS: tuple[Any, ...] = (
    {"path": "src/app/models.py"},
    {"pattern": "def main", "path": "."},
    {"query": "how to {escape} braces"},
    {},
    {"content": "print('hello')\n" * 40, "path": "hello.py"},
)


@functools.cache
def _text(max_repeat: int = 400) -> st.SearchStrategy[str]:
    """Canned sentences at many lengths, and sometimes short arbitrary text."""
    pool = st.sampled_from(tuple(t for t in _TEXTS if len(t) <= max_repeat * 60))
    return st.one_of(pool, pool, pool, st.text(max_size=8))


@functools.cache
def _user_content() -> st.SearchStrategy[Any]:
    media = st.sampled_from(_MEDIA).map(_fresh)
    as_list = st.lists(st.one_of(_text(), media), min_size=1, max_size=3)
    return st.one_of(_text(), _text(), as_list)


@functools.cache
def _tool_content() -> st.SearchStrategy[Any]:
    return st.sampled_from(_TOOL_DATA + _TEXTS).map(_fresh)


@functools.cache
def _args() -> st.SearchStrategy[dict[str, Any] | str]:
    return st.sampled_from(_ARGS + tuple(json.dumps(a) for a in _ARGS)).map(_fresh)


class _Shape(NamedTuple):
    """The optional extras of one response and the request after it, drawn as one choice."""

    thinking: bool
    native: bool
    text: bool
    reorder: bool
    user_prompt: bool


# Each extra's odds (true:false), realised by repetition in one table: index 0 (no extras) is what shrinks to.
_ODDS = {"thinking": (1, 3), "native": (1, 6), "text": (1, 3), "reorder": (1, 3), "user_prompt": (1, 9)}
_SHAPES = st.sampled_from(
    [
        _Shape(*flags)
        for flags in itertools.product((False, True), repeat=len(_ODDS))
        for _ in range(math.prod(odds[flag] for odds, flag in zip(_ODDS.values(), flags, strict=True)))
    ]
)


@dataclass
class _Builder:
    """Mutable state while one history is drawn: id counters and the options fixed for the whole history."""

    draw: Any
    for_request: bool
    with_ids: bool
    instructions: str | None
    max_steps: int
    summary_rate: float
    messages: list[ModelMessage] = field(default_factory=list[ModelMessage])
    next_call: int = 0
    next_message: int = 0

    def call_id(self) -> str:
        self.next_call += 1
        return f"call_{self.next_call}"

    def metadata(self) -> dict[str, Any] | None:
        if not self.with_ids:
            return None
        self.next_message += 1
        return {MESSAGE_ID_KEY: f"msg-{self.next_message}"}

    def request(self, parts: list[ModelRequestPart]) -> None:
        self.messages.append(ModelRequest(parts=parts, instructions=self.instructions, metadata=self.metadata()))

    def response(self, parts: list[ModelResponsePart]) -> None:
        usage = RequestUsage(input_tokens=150 * len(self.messages), output_tokens=len(parts) * 7)
        self.messages.append(ModelResponse(parts=parts, usage=usage, model_name="test", metadata=self.metadata()))

    def maybe_summary(self, rate: float | None = None) -> None:
        """A summary where a compaction would put it: before a response or a user turn, never inside a pair."""
        rate = self.summary_rate if rate is None else rate
        if rate and self.draw(_ints(0, 99)) < rate * 100:
            self.summary()

    def summary(self) -> None:
        self.next_message += 1
        kind = self.draw(_SUMMARY_KINDS)
        info: dict[str, Any] | None = None
        if kind == "ours":
            covers = [f"old-{self.next_message}-{k}" for k in range(self.draw(_ints(0, 3)))]
            info = {
                "covers": covers,
                "covered_messages": len(covers),
                "replaces_summaries": [],
                "summarizer": "deterministic",
                "created_at": "2025-01-01T00:00:00+00:00",
            }
        elif kind == "window":
            info = {"kind": "window", "dropped_messages": self.draw(_ints(1, 50))}
        content = self.draw(_SUMMARY_TEXTS)
        part = CompactionPart(content=content, metadata={SUMMARY_METADATA_KEY: info} if info is not None else None)
        metadata = {MESSAGE_ID_KEY: f"summary-{self.next_message}"} if self.with_ids else None
        self.messages.append(ModelRequest(parts=[part], metadata=metadata))

    def native_pair(self) -> list[ModelResponsePart]:
        call_id = f"ws_{self.call_id()}"
        return [
            NativeToolCallPart("web_search", {"query": "pydantic-ai"}, call_id, provider_name="openai"),
            NativeToolReturnPart("web_search", self.draw(_tool_content()), call_id, provider_name="openai"),
        ]

    def decorations(self, shape: _Shape) -> list[ModelResponsePart]:
        """What may precede the calls or the text of a response: thinking, native tool pairs, text."""
        parts: list[ModelResponsePart] = []
        if shape.thinking:
            parts.append(ThinkingPart(self.draw(_text(50)), signature="sig"))
        if shape.native:
            parts.extend(self.native_pair())
        return parts

    def tool_step(self, retry_tools: list[str]) -> list[str]:
        """A response with parallel calls (retried tools called again first) and the request answering all of
        them. Returns the tools whose results ask for a retry."""
        shape: _Shape = self.draw(_SHAPES)
        parts = self.decorations(shape)
        if shape.text:
            parts.append(TextPart(self.draw(_text(50))))
        names = [
            *retry_tools,
            *self.draw(_MORE_TOOLS if retry_tools else _SOME_TOOLS),
        ]
        calls = [ToolCallPart(name, self.draw(_args()), self.call_id()) for name in names]
        parts.extend(calls)
        self.response(parts)
        outcomes = self.draw(_outcomes(len(calls)))
        returns: list[ModelRequestPart] = [
            ToolReturnPart(call.tool_name, self.draw(_tool_content()), call.tool_call_id, outcome=outcome)
            for call, outcome in zip(calls, outcomes, strict=True)
        ]
        if len(returns) > 1 and shape.reorder:
            # parallel tools finish in any order
            turn = self.draw(_ints(1, len(returns) - 1))
            returns = returns[turn:] + returns[:turn]
        if shape.user_prompt:
            returns.append(UserPromptPart(self.draw(_user_content())))
        self.request(returns)
        return [c.tool_name for c, o in zip(calls, outcomes, strict=True) if o == "retried"]

    def turn(self, *, prompt_parts: list[ModelRequestPart] | None, finished: bool) -> None:
        """One turn. `prompt_parts=None` continues a turn a summary cut into (it starts with a response)."""
        steps = self.draw(_ints(0 if prompt_parts is not None else 1, self.max_steps))
        if prompt_parts is not None:
            self.request([*prompt_parts, UserPromptPart(self.draw(_user_content()))])
            if steps or finished:  # the in-flight prompt itself is never cut off
                self.maybe_summary()
        retry: list[str] = []
        for step in range(steps):
            retry = self.tool_step(retry)
            if step < steps - 1 or finished:
                self.maybe_summary()
        if not finished:
            return
        while retry:  # a retried call is called again before the run can end
            retry = self.tool_step(retry)
        parts = self.decorations(self.draw(_SHAPES))
        parts.append(TextPart(self.draw(_text())))
        self.response(parts)


_INSTRUCTIONS = st.none() | st.just("Use the tools; be brief.")
_SUMMARY_RATES = st.sampled_from((0.0, 0.0, 0.05, 0.2))
_SYSTEM_MODES = st.sampled_from(("none", "with_user", "alone"))
_SYSTEMS = st.lists(st.sampled_from(_SYSTEM_PROMPTS), min_size=1, max_size=2)


@st.composite
def histories(
    draw: Any,
    *,
    for_request: bool = True,
    max_turns: int = 5,
    max_steps: int = 4,
    summaries: bool = True,
) -> list[ModelMessage]:
    """A valid history. `for_request=True`: it ends with a `ModelRequest` (a new prompt or pending tool results);
    `for_request=False`: it ends with the final `ModelResponse` of a finished run."""
    builder = _Builder(
        draw,
        for_request=for_request,
        with_ids=draw(st.booleans()),
        instructions=draw(_INSTRUCTIONS),
        max_steps=max_steps,
        summary_rate=draw(_SUMMARY_RATES) if summaries else 0.0,
    )
    system_mode = draw(_SYSTEM_MODES)
    system = [SystemPromptPart(text) for text in draw(_SYSTEMS)]
    pending_system: list[ModelRequestPart] = []
    if system_mode == "alone":
        builder.request(list(system))
    elif system_mode == "with_user":
        pending_system = list(system)

    continuation = False
    if summaries and draw(_ints(0, 3)) == 0:
        if pending_system:  # a compaction splits the system prompt off the first request
            builder.request(pending_system)
            pending_system = []
        builder.summary()
        continuation = draw(st.booleans())  # the kept tail started inside a turn

    turns = draw(_ints(1, max_turns))
    for t in range(turns):
        last = t == turns - 1
        finished = not (last and for_request)
        if t == 0 and continuation:
            builder.turn(prompt_parts=None, finished=finished)
        else:
            builder.turn(prompt_parts=pending_system, finished=finished)
            pending_system = []
        if not last:
            builder.maybe_summary()
    return builder.messages


# --- processor settings -------------------------------------------------------------------------------------


def _sum_of_estimates(messages: Sequence[ModelMessage]) -> int:
    """A plain sync counter (no cache) that agrees with the default estimate."""
    return sum(estimate_message_tokens(m) for m in messages)


async def _async_sum_of_estimates(messages: Sequence[ModelMessage]) -> int:
    """An async counter that agrees with the default estimate."""
    return _sum_of_estimates(messages)


COUNTERS: tuple[Any, ...] = (
    count_tokens_approximately,
    IncrementalCounter(),
    _sum_of_estimates,
    _async_sum_of_estimates,
)
"""Token counters in every form a processor accepts; all give the same numbers as the default estimate."""

_MAX_MESSAGES = 45
_MAX_TOKENS = 40_000
_SIZES: dict[str, st.SearchStrategy[Any]] = {
    "messages": st.integers(1, _MAX_MESSAGES).map(lambda n: ("messages", n)),
    "tokens": st.integers(1, _MAX_TOKENS).map(lambda n: ("tokens", n)),
    "fraction": st.floats(0.01, 1.0).map(lambda f: ("fraction", f)),
}
_ONE_SIZE = st.one_of(*_SIZES.values())
_TRIGGERS = st.one_of(_ONE_SIZE, st.lists(_ONE_SIZE, min_size=1, max_size=3))
_KEEP_KINDS = st.sampled_from(("int", "messages", "tokens", "fraction"))
_WINDOWS = st.integers(1_000, 60_000)
_RESERVES = st.sampled_from((0, 0, 500))
_COUNTERS = st.sampled_from(COUNTERS)


def triggers() -> st.SearchStrategy[Any]:
    """One `ContextSize` or a list of them (any fires)."""
    return _TRIGGERS


def _below(trigger: Any, kind: str) -> int | float | None:
    """The smallest same-kind trigger amount a keep must stay under."""
    items = trigger if isinstance(trigger, list) else [trigger] if trigger is not None else []
    amounts = [amount for k, amount in items if k == kind]
    return min(amounts) if amounts else None


@st.composite
def keeps(draw: Any, trigger: Any = None) -> Any:
    """A keep (`int` including 0, or a `ContextSize` including 0) smaller than every same-kind trigger."""
    kind = draw(_KEEP_KINDS)
    bound = _below(trigger, "messages" if kind == "int" else kind)
    if kind == "fraction":
        return ("fraction", draw(_floats(0.0, 1.0 if bound is None else bound / 2)))
    top = (_MAX_MESSAGES if kind != "tokens" else _MAX_TOKENS) if bound is None else int(bound) - 1
    amount = draw(_ints(0, top))
    return amount if kind == "int" else (kind, amount)


@functools.cache
def _floats(low: float, high: float) -> st.SearchStrategy[float]:
    return st.floats(low, high)


@st.composite
def summarization_configs(draw: Any) -> dict[str, Any]:
    """Keyword arguments for `SummarizationProcessor` / `SlidingWindowProcessor` (`max_tokens` always given)."""
    trigger = draw(_TRIGGERS)
    return {
        "trigger": trigger,
        "keep": draw(keeps(trigger)),
        "keep_head": draw(_ints(0, 3)),
        "max_tokens": draw(_WINDOWS),
        "reserve_output_tokens": draw(_RESERVES),
        "token_counter": draw(_COUNTERS),
    }


sliding_window_configs = summarization_configs

_CLEAR_AT_LEAST = st.sampled_from((0, 1, 50, 2_000))
_OPTIONAL_TRIGGERS = st.none() | _TRIGGERS
_EXCLUDED = st.lists(st.sampled_from(TOOL_NAMES), max_size=2, unique=True)


@st.composite
def clear_tool_results_configs(draw: Any) -> dict[str, Any]:
    return {
        "keep_last": draw(_ints(0, 5)),
        "clear_at_least": draw(_CLEAR_AT_LEAST),
        "trigger": draw(_OPTIONAL_TRIGGERS),
        "exclude_tools": draw(_EXCLUDED),
        "max_tokens": draw(_WINDOWS),
        "token_counter": draw(_COUNTERS),
    }


@st.composite
def limit_warner_configs(draw: Any) -> dict[str, Any]:
    """The plain form: only the context check applies, against a small `max_context_tokens`."""
    return {
        "warn_at": draw(_floats(0.05, 1.0)),
        "max_context_tokens": draw(_ints(1, 5_000)),
        "token_counter": draw(_COUNTERS),
    }


# --- broken inputs ----------------------------------------------------------------------------------------------

_DAMAGE = st.sampled_from(("delete", "duplicate", "swap", "drop_part", "move_to_front"))


@st.composite
def damaged_histories(draw: Any) -> list[ModelMessage]:
    """A valid history with 1-3 random edits (messages deleted, duplicated, swapped, parts dropped): the kind of
    input a processor may get from user code. Processors must not crash or hang on it, nor add new problems."""
    messages = list(draw(histories(for_request=draw(st.booleans()))))
    for _ in range(draw(_ints(1, 3))):
        if not messages:
            break
        damage = draw(_DAMAGE)
        i = draw(_ints(0, len(messages) - 1))
        if damage == "delete":
            del messages[i]
        elif damage == "duplicate":
            messages.insert(i, messages[i])
        elif damage == "swap" and i + 1 < len(messages):
            messages[i], messages[i + 1] = messages[i + 1], messages[i]
        elif damage == "move_to_front":
            messages.insert(0, messages.pop(i))
        elif damage == "drop_part":
            parts = list(messages[i].parts)
            if parts:
                del parts[draw(_ints(0, len(parts) - 1))]
            messages[i] = dataclasses.replace(messages[i], parts=parts)  # type: ignore[arg-type]
    return messages


@st.composite
def histories_with_faults(draw: Any) -> list[ModelMessage]:
    """A valid history with one or two earlier faults a compaction must not multiply: a tool result dropped (an
    orphan call), or one response's results split over two requests (as some frameworks record parallel results)."""
    messages = list(draw(histories(for_request=True, max_turns=6)))
    for _ in range(draw(_ints(1, 2))):
        answering = [
            i
            for i, m in enumerate(messages)
            if isinstance(m, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in m.parts)
        ]
        if not answering:
            break
        i = draw(st.sampled_from(answering))
        parts = list(messages[i].parts)
        returns = [k for k, p in enumerate(parts) if isinstance(p, ToolReturnPart)]
        if len(returns) < 2 or draw(st.booleans()):
            del parts[draw(st.sampled_from(returns))]  # an orphan call
            messages[i] = dataclasses.replace(messages[i], parts=parts or [UserPromptPart("(continued)")])  # type: ignore[arg-type]
        else:
            split = draw(_ints(1, len(returns) - 1))
            first = [p for k, p in enumerate(parts) if k in returns[:split]]
            rest = [p for k, p in enumerate(parts) if k not in returns[:split]]
            messages[i : i + 1] = [dataclasses.replace(messages[i], parts=first), ModelRequest(parts=rest)]  # type: ignore[arg-type]
    return messages
