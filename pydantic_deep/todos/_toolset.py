"""Todos: a short task list the agent keeps in the run's deps and sees in the conversation.

The list lives in `DeepAgentDeps.todos` (or any deps with a `todos` list). The model sees it where `write_todos`
returns it, in the history: every compaction keeps the latest todo exchange verbatim (the working set), and
`read_todos` shows it at any time. It is not written into the instructions: the instructions come first in
every request, so a list that changed there would make the provider's prompt cache re-write the whole
conversation after them at every update (3.2x the bill of an unmanaged coding session, on Anthropic).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic_ai import ModelRetry, RunContext, ToolFailed
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.toolsets import FunctionToolset

__all__ = ["Todo", "TodoCapability", "TodoStatus", "render_todos", "todo_toolset"]

TodoStatus = Literal["pending", "in_progress", "completed"]

_MARKS: dict[str, str] = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class Todo(BaseModel):
    """One task: what to do and where it stands."""

    content: str = Field(min_length=1, max_length=2_000)
    status: TodoStatus = "pending"


def render_todos(todos: list[Todo]) -> str:
    """The list as the model sees it: `1. [~] write the parser`."""
    if not todos:
        return "(no todos)"
    return "\n".join(f"{i}. {_MARKS[t.status]} {t.content}" for i, t in enumerate(todos, start=1))


def _todos_of(ctx: RunContext[Any]) -> list[Todo]:
    todos = getattr(ctx.deps, "todos", None)
    if not isinstance(todos, list):
        raise ToolFailed("todos are unavailable: the agent's deps have no `todos` list (use DeepAgentDeps)")
    return todos  # pyright: ignore[reportUnknownVariableType]


def todo_toolset() -> FunctionToolset[Any]:
    """`write_todos(todos)` replaces the whole list; `read_todos()` shows it."""
    toolset: FunctionToolset[Any] = FunctionToolset()

    @toolset.tool
    async def write_todos(ctx: RunContext[Any], todos: list[Todo]) -> str:
        """Replace the todo list. Send the whole list each time, with each item's status
        (pending, in_progress, completed); keep at most one item in_progress.

        Args:
            todos: the complete, updated list.
        """
        in_progress = sum(t.status == "in_progress" for t in todos)
        if in_progress > 1:
            raise ModelRetry(f"{in_progress} items are in_progress; keep at most one in_progress at a time")
        current = _todos_of(ctx)
        current[:] = todos
        done = sum(t.status == "completed" for t in todos)
        return f"Todo list updated ({done}/{len(todos)} completed):\n{render_todos(todos)}"

    @toolset.tool
    async def read_todos(ctx: RunContext[Any]) -> str:
        """Show the current todo list with each item's status."""
        return render_todos(_todos_of(ctx))

    return toolset


_GUIDE = (
    "For multi-step work, plan with write_todos and keep the list current (send the whole list, each item with "
    "its status; at most one in_progress). The current list is the latest write_todos result in this "
    "conversation; read_todos shows it."
)


@dataclass
class TodoCapability(AbstractCapability[Any]):
    """The todo tools plus a short, fixed instructions section on how to use them.

    `show_in_instructions=True` writes the current list into the instructions instead (rebuilt on every request):
    the model sees it there even when no todo exchange is in the history, but every change of the list then
    re-writes the provider's cached prompt from the instructions on."""

    heading: str = "## Todos"
    show_in_instructions: bool = False
    _toolset: FunctionToolset[Any] = field(default_factory=todo_toolset, init=False, repr=False)

    def get_toolset(self) -> FunctionToolset[Any]:
        return self._toolset

    def get_instructions(self) -> Any:
        heading = self.heading
        if not self.show_in_instructions:
            return f"{heading}\n{_GUIDE}"

        def todo_instructions(ctx: RunContext[Any]) -> str:
            todos = getattr(ctx.deps, "todos", None)
            if not isinstance(todos, list) or not todos:
                return f"{heading}\nNo todos yet. For multi-step work, plan with write_todos and keep it current."
            return f"{heading}\n{render_todos(todos)}"  # pyright: ignore[reportUnknownArgumentType]

        return todo_instructions

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None
