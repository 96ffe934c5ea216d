"""Strategy presets: `ContextConfig` names a context strategy and builds its capability stack."""

from ._config import DEFAULT_TARGETS, STRATEGIES, CompressionLevel, ContextConfig, Strategy

__all__ = ["DEFAULT_TARGETS", "STRATEGIES", "CompressionLevel", "ContextConfig", "Strategy"]
