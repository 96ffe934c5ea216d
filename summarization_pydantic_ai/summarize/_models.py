"""Which model writes a summary: the run's own (`RUN_MODEL`, the default), a named one, or a `Model`.

A model name is checked when the summarizer is built (an unknown provider is refused at once), without creating
the model: a valid name whose API key is missing, or whose provider package is not installed, is accepted, and
fails only when a summary is requested (then the deterministic summary is used).
"""

from __future__ import annotations

from typing import Any, Final

from ._protocol import SummarizerError

__all__ = ["RUN_MODEL", "ModelUnavailable", "check_model_name", "model_window"]


class _RunModel:
    """The type of `RUN_MODEL` (one instance)."""

    _instance: _RunModel | None = None

    def __new__(cls) -> _RunModel:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "RUN_MODEL"

    def __reduce__(self) -> str:
        return "RUN_MODEL"


RUN_MODEL: Final = _RunModel()
"""The default summarization model: the model of the run being compacted.

Inside a run, the summary request reuses the run's request (same instructions, tool definitions and messages)
and only appends the summary instruction, so a provider with prefix caching reads it from cache. Outside a run
(`compact()` on a plain history) the `model_name` of the processor or middleware is used when set; when no
model can be called, the deterministic summary is used (one warning per processor or middleware)."""


class ModelUnavailable(SummarizerError):
    """No model could be called (none known outside a run, a missing API key or provider package): asking again
    would fail the same way, so the deterministic summary is used at once."""


def check_model_name(name: str) -> None:
    """Refuse a model name pydantic-ai cannot resolve (no `provider:` prefix, an unknown provider), without
    creating the model (that needs the API key, which may be set later or elsewhere)."""
    from pydantic_ai.models import parse_model_id
    from pydantic_ai.providers import infer_provider_class

    if name == "test":
        return
    provider, model = parse_model_id(name)
    if provider is None or not provider.strip() or not model.strip():
        raise ValueError(f"cannot resolve the summarization model {name!r}: expected 'provider:model'")
    try:
        infer_provider_class(provider)
    except ImportError:
        return  # a known provider whose package is not installed: the summary falls back when it is needed
    except ValueError as exc:
        raise ValueError(f"cannot resolve the summarization model {name!r}: {exc}") from exc


def model_window(model: Any) -> int | None:
    """The context window of a `Model` or a model name, when known (never a network call)."""
    from .._windows import is_offline_model, resolve_max_tokens

    if model is None or model is RUN_MODEL or is_offline_model(model):
        return None
    window = getattr(model, "context_window", None)
    if isinstance(window, int) and window > 0:
        return window
    try:
        return resolve_max_tokens(model)
    except TypeError:
        return None
