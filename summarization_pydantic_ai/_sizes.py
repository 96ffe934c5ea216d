"""`ContextSize`: how triggers and keep settings are spelled, validated once at construction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = [
    "ContextSize",
    "Measure",
    "normalize_keep",
    "normalize_keep_head",
    "normalize_trigger",
    "validate_context_size",
]

ContextSize: TypeAlias = (
    tuple[Literal["messages"], int] | tuple[Literal["tokens"], int] | tuple[Literal["fraction"], float]
)
"""`("messages", n)`, `("tokens", n)` or `("fraction", f)` of the token budget (context window minus reserve)."""

_KINDS = ("messages", "tokens", "fraction")


def validate_context_size(value: Any, *, name: str, allow_zero: bool = False) -> ContextSize:
    """Check one `ContextSize` and return it as a tuple; raise `ValueError`/`TypeError` naming `name` otherwise."""
    if not isinstance(value, tuple | list) or len(value) != 2:  # pyright: ignore[reportUnknownArgumentType]
        raise TypeError(
            f"{name} must be a ContextSize such as ('messages', 50), ('tokens', 100_000) or ('fraction', 0.8); "
            f"got {value!r}"
        )
    kind, amount = value[0], value[1]  # pyright: ignore[reportUnknownVariableType]
    if kind not in _KINDS:
        raise ValueError(f"{name}: unknown kind {kind!r}; use one of {', '.join(_KINDS)}")
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        raise TypeError(f"{name}: the amount of {kind!r} must be a number, got {amount!r}")
    if kind == "fraction":
        low_ok = amount >= 0 if allow_zero else amount > 0
        if not (low_ok and amount <= 1):
            bound = "[0, 1]" if allow_zero else "(0, 1]"
            raise ValueError(f"{name}: a fraction must be in {bound}, got {amount!r}")
        return ("fraction", float(amount))
    if not isinstance(amount, int):
        raise TypeError(f"{name}: {kind} must be a whole number, got {amount!r}")
    if amount < 0 or (amount == 0 and not allow_zero):
        raise ValueError(f"{name}: {kind} must be {'>= 0' if allow_zero else '> 0'}, got {amount}")
    return (kind, amount)  # type: ignore[return-value]


def normalize_trigger(trigger: Any, *, name: str = "trigger") -> tuple[ContextSize, ...]:
    """A trigger is one `ContextSize`, a list of them (any fires), or `None` (never fires)."""
    if trigger is None:
        return ()
    if isinstance(trigger, list):
        items: list[Any] = trigger  # pyright: ignore[reportUnknownVariableType]
        if not items:
            raise ValueError(f"{name}: an empty list never fires; pass None to disable")
        return tuple(validate_context_size(t, name=f"{name}[{i}]") for i, t in enumerate(items))
    return (validate_context_size(trigger, name=name),)


def normalize_keep(keep: Any, *, name: str = "keep") -> ContextSize:
    """A keep is an `int` number of messages or a `ContextSize`; zero keeps only the in-flight exchange."""
    if isinstance(keep, bool):
        raise TypeError(f"{name} must be an int or a ContextSize, got {keep!r}")
    if isinstance(keep, int):
        if keep < 0:
            raise ValueError(f"{name} must be >= 0, got {keep}")
        return ("messages", keep)
    return validate_context_size(keep, name=name, allow_zero=True)


def normalize_keep_head(keep_head: Any) -> ContextSize:
    """A kept head is an `int` number of messages (`None`: 0) or a `ContextSize`: `("messages", n)`, the leading
    messages within `("tokens", n)`, or within `("fraction", f)` of the token budget."""
    return ("messages", 0) if keep_head is None else normalize_keep(keep_head, name="keep_head")


def check_keep_below_trigger(keep: ContextSize, triggers: Sequence[ContextSize]) -> None:
    """A keep at or above a trigger of the same kind would fire again right after every compaction."""
    for trigger in triggers:
        if trigger[0] == keep[0] and keep[1] >= trigger[1]:
            raise ValueError(
                f"keep {keep!r} must be smaller than trigger {trigger!r}, or every compaction would fire again"
            )


@dataclass(frozen=True)
class Measure:
    """The size of a history as a trigger sees it."""

    messages: int
    tokens: int
    budget: int | None
    """Context window minus the output reserve, when known."""

    def reaches(self, size: ContextSize) -> bool:
        """Whether this measure is at or above `size`."""
        kind, amount = size
        if kind == "messages":
            return self.messages >= amount
        if kind == "tokens":
            return self.tokens >= amount
        return self.budget is not None and self.tokens >= amount * self.budget

    def token_threshold(self, size: ContextSize) -> int | None:
        """`size` expressed in tokens, when it can be."""
        kind, amount = size
        if kind == "tokens":
            return int(amount)
        if kind == "fraction" and self.budget is not None:
            return int(amount * self.budget)
        return None


def keep_tokens(keep: ContextSize, budget: int | None) -> int | None:
    """A token keep expressed in tokens (`None` for a message keep)."""
    if keep[0] == "tokens":
        return int(keep[1])
    if keep[0] == "fraction":
        if budget is None:
            raise ValueError("a ('fraction', f) keep needs a known context window: set max_tokens or model_name")
        return int(keep[1] * budget)
    return None
