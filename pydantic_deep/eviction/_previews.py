"""The previews in a history `EvictionProcessor` has handled: their metadata, the ones whose file retention deleted,
the new ones it watches, and the history with the replaced tool returns in place."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

from ._policy import EVICTION_METADATA_KEY
from ._run_state import RunState

__all__ = ["mark_removed", "metadata_of", "watch_new_previews", "with_replacements"]


def metadata_of(value: Any) -> dict[str, Any]:
    """A copy of `value` when it is a dict (a part's metadata, or the eviction entry in it), else `{}`."""
    return dict(value) if isinstance(value, dict) else {}  # pyright: ignore[reportUnknownArgumentType]


def mark_removed(
    messages: Sequence[ModelMessage],
    state: RunState,
    removed: set[str],
    replacements: dict[tuple[int, int], ToolReturnPart],
) -> None:
    """Previews whose file retention deleted (in this or another session on the backend) say so, instead of
    sending the model to a path that no longer exists."""
    if not removed or not state.previews:
        return
    for path in removed & state.previews.keys():
        for i, j in state.previews.pop(path):
            part = messages[i].parts[j]
            if (i, j) in replacements or not isinstance(part, ToolReturnPart):
                continue
            info = {**metadata_of(metadata_of(part.metadata).get(EVICTION_METADATA_KEY)), "state": "removed"}
            note = (
                f"[This output was evicted to {path}, and that file was later removed by the eviction retention "
                "policy: it can no longer be read. Run the tool again if you need it.]"
            )
            metadata = {**metadata_of(part.metadata), EVICTION_METADATA_KEY: info}
            replacements[(i, j)] = replace(part, content=note, metadata=metadata)


def watch_new_previews(state: RunState, replacements: dict[tuple[int, int], ToolReturnPart]) -> None:
    """Previews written now are watched like the ones found."""
    for (i, j), part in replacements.items():
        info = metadata_of(metadata_of(part.metadata).get(EVICTION_METADATA_KEY))
        if info.get("state") == "archived" and isinstance(path := info.get("path"), str):
            state.previews.setdefault(path, []).append((i, j))


def with_replacements(
    messages: Sequence[ModelMessage], replacements: dict[tuple[int, int], ToolReturnPart]
) -> list[ModelMessage]:
    """A copy of `messages` with each replaced tool return (request index, part index) in place."""
    result = list(messages)
    for i in sorted({i for i, _ in replacements}):
        request = result[i]
        assert isinstance(request, ModelRequest)
        parts = [replacements.get((i, j), p) for j, p in enumerate(request.parts)]
        result[i] = replace(request, parts=parts)
    return result
