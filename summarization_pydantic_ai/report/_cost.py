"""The report's cost figures, from the cost module's per-session totals."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.messages import ModelMessage

from ._page import CostView

__all__ = ["cost_view"]


def cost_view(messages: Sequence[ModelMessage]) -> CostView | None:
    del messages
    return None
