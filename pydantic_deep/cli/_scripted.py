"""`--model test`: an offline, scripted model for trying the command line and testing it (no key, no network).

It reads the latest user prompt and answers with one tool call or one text:

| prompt | does |
| --- | --- |
| `read PATH` | `read_file(PATH)` |
| `write PATH: TEXT` | `write_file(PATH, TEXT)` |
| `ls [PATH]` / `grep PATTERN` | `ls` / `grep` |
| `remember TEXT` | `write_memory(TEXT)` (MEMORY.md) |
| `todo A; B; C` | `write_todos` with those items |
| `search QUERY` | `search_conversation_history(QUERY)` |
| `slow` | streams a long answer slowly (to try Ctrl-C) |
| anything else | echoes the prompt |

After a tool result it answers with the tool's name and the result's first line.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

__all__ = ["SLOW_WORDS", "Planner", "offline_model", "scripted_model"]

SLOW_WORDS = 60
_SLOW_DELAY = 0.2
_STREAM_DELAY = 0.01


def _latest_prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content.strip()
    return ""


def _after_tool(request: ModelRequest) -> str | None:
    """The answer once the tool ran: its name and the first line of what it returned."""
    for part in request.parts:
        if isinstance(part, ToolReturnPart):
            first = (part.model_response_str().strip().splitlines() or [""])[0][:160]
            if part.outcome != "success":
                return f"The {part.tool_name} call failed: {first}"
            return f"Done: {part.tool_name} returned: {first}"
    return None


def _todos(text: str) -> dict[str, Any]:
    items = [t.strip() for t in text.split(";") if t.strip()]
    todos = [{"content": t, "status": "in_progress" if i == 0 else "pending"} for i, t in enumerate(items)]
    return {"todos": todos}


def _write(text: str) -> dict[str, Any]:
    path, _, content = text.partition(":")
    return {"path": path.strip(), "content": content.strip() + "\n"}


_COMMANDS: dict[str, tuple[str, Callable[[str], dict[str, Any]]]] = {
    "read": ("read_file", lambda rest: {"path": rest}),
    "write": ("write_file", _write),
    "ls": ("ls", lambda rest: {"path": rest or "/"}),
    "grep": ("grep", lambda rest: {"pattern": rest}),
    "remember": ("write_memory", lambda rest: {"content": rest}),
    "todo": ("write_todos", _todos),
    "search": ("search_conversation_history", lambda rest: {"query": rest}),
}


def _plan(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if isinstance(last, ModelRequest) and (answer := _after_tool(last)) is not None:
        return ModelResponse(parts=[TextPart(answer)])
    prompt = _latest_prompt(messages)
    word, _, rest = prompt.partition(" ")
    command = _COMMANDS.get(word.lower())
    tools = {t.name for t in info.function_tools}
    if command is not None and command[0] in tools:
        return ModelResponse(parts=[ToolCallPart(command[0], command[1](rest.strip()))])
    if word.lower() == "slow":
        return ModelResponse(parts=[TextPart(" ".join(f"word{i}" for i in range(SLOW_WORDS)))])
    return ModelResponse(parts=[TextPart(f"(offline test model) You said: {prompt}")])


Planner = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


def scripted_model(
    plan: Planner, name: str, delay: Callable[[list[ModelMessage]], float] | None = None
) -> FunctionModel:
    """A `FunctionModel` that answers with `plan`, streaming too (text word by word, `delay(messages)` seconds
    apart; tool calls whole), so a chat can stream it."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        response = plan(messages, info)
        pause = delay(messages) if delay is not None else _STREAM_DELAY
        for index, part in enumerate(response.parts):
            if isinstance(part, ToolCallPart):
                yield {
                    index: DeltaToolCall(
                        name=part.tool_name, json_args=json.dumps(part.args), tool_call_id=part.tool_call_id
                    )
                }
            elif isinstance(part, TextPart):
                for i, word in enumerate(part.content.split(" ")):
                    await asyncio.sleep(pause)
                    yield word if i == 0 else f" {word}"

    return FunctionModel(plan, stream_function=stream, model_name=name)


def _delay(messages: list[ModelMessage]) -> float:
    last = messages[-1]
    fresh = isinstance(last, ModelRequest) and any(isinstance(p, UserPromptPart) for p in last.parts)
    return _SLOW_DELAY if fresh and _latest_prompt(messages).lower().startswith("slow") else _STREAM_DELAY


def offline_model() -> FunctionModel:
    """The scripted model behind `--model test`."""
    return scripted_model(_plan, "test", _delay)
