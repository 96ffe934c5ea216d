"""`complete_phase`: the tool a model calls to mark a phase of its task done."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic_ai import ModelRetry
from pydantic_ai.toolsets import FunctionToolset

__all__ = ["PhaseMarker", "phase_toolset"]


class PhaseMarker(Protocol):
    """What the tool uses of the capability it marks phases on (`PhaseCheckpoints`)."""

    @property
    def phases(self) -> Sequence[str] | None: ...
    @property
    def tool_name(self) -> str: ...

    def mark_done(self, name: str, *, state: Any = None, objectives: Sequence[str] = ()) -> object: ...


def phase_toolset(phases: PhaseMarker) -> FunctionToolset[Any]:
    """A toolset with one tool (named `phases.tool_name`) that calls `phases.mark_done`."""
    toolset: FunctionToolset[Any] = FunctionToolset()
    declared = f" One of: {', '.join(phases.phases)}." if phases.phases else ""

    async def complete_phase(
        name: str, objectives: list[str] | None = None, state: dict[str, Any] | None = None
    ) -> str:
        try:
            phases.mark_done(name, state=state, objectives=objectives or ())
        except (TypeError, ValueError) as exc:
            raise ModelRetry(str(exc)) from exc
        return (
            f"Phase {name!r} marked done. The conversation so far will be replaced by a checkpoint holding the "
            "state and objectives you gave; continue with the next phase."
        )

    description = (
        "Mark a phase of the task done when all its objectives are met. The messages of the finished phase are "
        "archived and replaced by a compact checkpoint: put everything later phases need in `state`."
        f"{declared}\n\nArgs:\n    name: the phase that is done.\n    objectives: the objectives it completed, "
        "one line each.\n    state: what the phase established (ids, URLs, values) as a JSON object."
    )
    toolset.add_function(complete_phase, name=phases.tool_name, description=description)
    return toolset
