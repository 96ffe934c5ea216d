"""Todos: `write_todos` / `read_todos`, kept in the deps and shown in the instructions."""

from ._toolset import Todo, TodoCapability, TodoStatus, render_todos, todo_toolset

__all__ = ["Todo", "TodoCapability", "TodoStatus", "render_todos", "todo_toolset"]
