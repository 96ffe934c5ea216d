"""Probes for any recorded session: the artifact trail read back from its own messages, and loading a file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, ToolCallPart, UserPromptPart

from .._artifacts import changed_path, todo_items
from .._messages import is_summary_message
from .._render import _describe_media, iter_media  # pyright: ignore[reportPrivateUsage]
from ..store import read_records
from ._probes import Probe, todo_patterns

__all__ = ["derive_probes", "load_messages"]


def derive_probes(messages: Sequence[ModelMessage]) -> list[Probe]:
    """The artifact-trail probes of any session: every file a tool call created or changed, each item of the
    latest todo list with its status, and the latest user request (its text and each attachment)."""
    return [*_file_probes(messages), *_todo_probes(messages), *_request_probes(messages)]


def _tool_calls(messages: Sequence[ModelMessage]) -> list[ToolCallPart]:
    return [p for m in messages if not isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolCallPart)]


def _file_probes(messages: Sequence[ModelMessage]) -> list[Probe]:
    paths = dict.fromkeys(p for p in map(changed_path, _tool_calls(messages)) if p)
    return [Probe("file_paths", "Which file did the agent create or change?", path) for path in paths]


def _todo_probes(messages: Sequence[ModelMessage]) -> list[Probe]:
    latest = next((items for items in map(todo_items, reversed(_tool_calls(messages))) if items is not None), None)
    probes: list[Probe] = []
    for content, status in latest or []:
        question = f"What is the status of the todo '{content}'?"
        probes.append(Probe("todo_state", question, f"{content}: {status}", todo_patterns(content, status)))
    return probes


def _request_probes(messages: Sequence[ModelMessage]) -> list[Probe]:
    for message in reversed(messages):
        prompts = [p for p in message.parts if isinstance(p, UserPromptPart)]
        if not isinstance(message, ModelRequest) or not prompts:
            continue
        probes: list[Probe] = []
        for part in prompts:
            texts = [part.content] if isinstance(part.content, str) else [c for c in part.content if isinstance(c, str)]
            question = "What is the user's latest request, word for word?"
            probes.extend(Probe("last_request", question, text) for text in texts if text.strip())
            for item in iter_media(part.content):
                question = "Which attachment came with the latest request?"
                probes.append(Probe("last_request", question, _describe_media(item)))
        return probes
    return []


def load_messages(path: str | os.PathLike[str]) -> list[ModelMessage]:
    """The original conversation in a history file: a `messages.json` written by the history store (summaries
    left out, each message in its latest version) or any JSON array of pydantic-ai messages. Read-only."""
    file = Path(path)
    batch = read_records(file)
    if not batch.records:
        data = file.read_bytes()  # FileNotFoundError names the path
        if not data.strip():
            return []
        messages = ModelMessagesTypeAdapter.validate_json(data)
        return [m for m in messages if not is_summary_message(m)]
    latest: dict[str, ModelMessage] = {}
    order: list[str | ModelMessage] = []
    for record in batch.records:
        if record.is_summary:
            continue
        if record.message_id is None:
            order.append(record.message)
        elif record.message_id not in latest:
            order.append(record.message_id)
        if record.message_id is not None:
            latest[record.message_id] = record.message
    return [latest[item] if isinstance(item, str) else item for item in order]
