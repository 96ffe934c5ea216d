"""Strategy presets: `ContextConfig` names a context strategy and builds its capability stack."""

from ._config import STRATEGIES, CompressionLevel, ContextConfig, Strategy

__all__ = ["STRATEGIES", "CompressionLevel", "ContextConfig", "Strategy"]
