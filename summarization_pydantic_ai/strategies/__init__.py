"""Strategy presets: `ContextConfig` names a context strategy and builds its capability stack."""

from ._config import STRATEGIES, ContextConfig, Strategy

__all__ = ["STRATEGIES", "ContextConfig", "Strategy"]
