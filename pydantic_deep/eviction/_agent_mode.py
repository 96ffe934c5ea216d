"""Agent mode: a large output stays whole in the context, marked, until the agent archives it with
`archive_tool_output` (or the policy's `archive_after_turns` have passed); then it is evicted like any other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart
from pydantic_ai.toolsets import FunctionToolset

__all__ = ["archive_toolset", "marked", "pending_return", "turns_after", "unmarked"]

_MARKER = "\n\n[This output is large"
"""How the marker `marked` appends begins: what `unmarked` cuts off again."""


def marked(text: str, *, tokens: int, tool_call_id: str, archive_after_turns: int) -> str:
    """`text` with the marker that tells the agent how to archive it, and when it is archived anyway."""
    return text + (
        f"{_MARKER} (~{tokens:,} tokens). Take what you need now, then call "
        f'archive_tool_output(tool_call_id="{tool_call_id}") to move it out of the context; it is '
        f"archived automatically after {archive_after_turns} more turns.]"
    )


def unmarked(content: Any) -> str:
    """The output as the tool returned it, without the marker."""
    return str(content).rsplit(_MARKER, 1)[0]


def pending_return(request: ModelRequest, tool_call_id: str) -> tuple[int, ToolReturnPart] | None:
    """The index and part of the output of `tool_call_id` in `request`, if it is still there."""
    return next(
        (
            (j, part)
            for j, part in enumerate(request.parts)
            if isinstance(part, ToolReturnPart) and part.tool_call_id == tool_call_id
        ),
        None,
    )


def turns_after(messages: Sequence[ModelMessage], i: int, turns: int) -> int:
    """The agent's turns (model responses) among the `2 * turns` messages after message `i`: whether `turns` have
    passed since it."""
    return sum(isinstance(m, ModelResponse) for m in messages[i + 1 : i + 1 + 2 * turns])


def archive_toolset(requests: set[str]) -> FunctionToolset[Any]:
    """The `archive_tool_output` tool; it adds the ids the agent asks for to `requests`, archived before the next
    model request."""
    toolset: FunctionToolset[Any] = FunctionToolset()

    @toolset.tool_plain
    def archive_tool_output(tool_call_id: str) -> str:
        """Move a large tool output you no longer need in full out of the context (it stays readable).

        Args:
            tool_call_id: the id named in the output's marker.
        """
        requests.add(tool_call_id)
        return f"Output {tool_call_id} will be archived before your next request; its path will be in its place."

    return toolset
