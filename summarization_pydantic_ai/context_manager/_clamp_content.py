"""Cut one part's content to about `keep` tokens, head and tail, keeping its shape: a text, a tool return, a prompt's
text items (shared by water level; media pass unchanged), tool-call arguments (still a JSON object, or a JSON string
when they were one). `water_level` is also how the overflow ladder shares a cut among several parts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from pydantic_ai.messages import TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

from .._tokens import estimate_text_tokens
from ._truncate import truncate_output, truncate_text

__all__ = ["MIN_CUT_TOKENS", "clamp_part", "water_level"]


MIN_CUT_TOKENS = 64
"""A cut never goes below this: the marker itself takes about 40 tokens."""
_MIN_ITEM_TOKENS = 16
"""One text item of a prompt with several may be cut to this (a bare marker)."""


def clamp_part(part: Any, keep: int, note: str) -> Any:
    """A copy of `part` (a kind `part_kind` names) with its content cut to about `keep` tokens; `note` ends the
    marker (where the original is kept)."""
    if isinstance(part, TextPart):
        return replace(part, content=truncate_text(part.content, keep, pointer=note)[0])
    if isinstance(part, ToolCallPart):
        call = cast(ToolCallPart[Any], part)
        return replace(call, args=_clamp_args(call.args, keep, note))
    if isinstance(part, ToolReturnPart):
        tool_return = cast(ToolReturnPart[Any], part)
        return replace(tool_return, content=truncate_output(tool_return.content, keep, pointer=note)[0])
    if isinstance(part, UserPromptPart):
        return replace(part, content=_clamp_prompt(part.content, keep, note))
    return replace(part, content=truncate_text(part.content, keep, pointer=note)[0])


def _clamp_prompt(content: Any, keep: int, note: str) -> Any:
    """A prompt's text items share `keep` by water level; media and other items pass unchanged."""
    if isinstance(content, str):
        return truncate_text(content, keep, pointer=note)[0]
    items: list[Any] = list(content)
    sizes = [estimate_text_tokens(item) if isinstance(item, str) else 0 for item in items]
    cap = water_level(sizes, sum(sizes) - keep, floor=_MIN_ITEM_TOKENS)
    return [
        truncate_text(item, cap, pointer=note)[0] if size > cap else item
        for item, size in zip(items, sizes, strict=True)
    ]


def _clamp_args(args: Any, keep: int, note: str) -> Any:
    """Arguments keep their shape: the longest string values are cut (by water level), so they stay a JSON object
    (or a JSON string, when they were one). Arguments that are not a JSON object (invalid JSON, a list), or an
    object still too large after that (huge numbers or lists), become `{"_clamped": "<head and tail>"}`: valid
    function arguments for every provider."""
    data: Any = args
    if isinstance(args, str):
        try:
            data = json.loads(args)
        except ValueError:
            data = None
    if isinstance(data, dict):
        obj = cast(dict[str, Any], data)
        leaves: list[int] = []
        _collect(obj, leaves)
        cap = water_level(leaves, estimate_text_tokens(_json(obj)) - keep, floor=MIN_CUT_TOKENS)
        cut: dict[str, Any] = _cut_leaves(obj, cap, note)
        text = _json(cut)
    else:
        cut, text = {}, args if isinstance(args, str) else _json(args)
    if not cut or estimate_text_tokens(text) > 2 * keep:
        cut = {"_clamped": truncate_text(text, keep, pointer=note)[0]}
    return _json(cut) if isinstance(args, str) else cut


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _collect(value: Any, sizes: list[int]) -> None:
    if isinstance(value, str):
        sizes.append(estimate_text_tokens(value))
    elif isinstance(value, dict):
        for item in cast(dict[str, Any], value).values():
            _collect(item, sizes)
    elif isinstance(value, list):
        for item in cast(list[Any], value):
            _collect(item, sizes)


def _cut_leaves(value: Any, cap: int, note: str) -> Any:
    if isinstance(value, str):
        return truncate_text(value, cap, pointer=note)[0]
    if isinstance(value, dict):
        return {k: _cut_leaves(v, cap, note) for k, v in cast(dict[str, Any], value).items()}
    if isinstance(value, list):
        return [_cut_leaves(v, cap, note) for v in cast(list[Any], value)]
    return value


def water_level(sizes: Sequence[int], excess: int, *, floor: int) -> int:
    """The largest cap (at least `floor`) such that cutting every size to it reclaims `excess`."""
    low, high = floor, max(sizes, default=floor)
    while low < high:
        cap = (low + high + 1) // 2
        if sum(max(s - cap, 0) for s in sizes) >= excess:
            low = cap
        else:
            high = cap - 1
    return low
