"""`--model NAME`: the offline `test` model, or a pydantic-ai model whose key and endpoint are checked up front.

Everything that can be known before the first turn is checked here, before a session is created, so a missing key,
an unknown name, a missing SDK or an unreachable endpoint is one line and leaves nothing on disk.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic_ai.exceptions import UserError
from pydantic_ai.models import Model, infer_model, parse_model_id

from ._errors import EXIT_USAGE, CliError
from ._scripted import offline_model

__all__ = [
    "API_KEY_VARS",
    "DEFAULT_MODEL",
    "MODEL_OPTIONS",
    "TEST_MODEL_WINDOW",
    "ResolvedModel",
    "probe",
    "resolve_model",
]

DEFAULT_MODEL = "openai:gpt-4.1"
TEST_MODEL_WINDOW = 16_000
MODEL_OPTIONS = (
    "--model test (offline), openai:gpt-4.1, anthropic:claude-sonnet-4-5 or any provider:model of pydantic-ai"
)
API_KEY_VARS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google-gla": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "groq": ("GROQ_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "cohere": ("CO_API_KEY",),
    "xai": ("XAI_API_KEY",),
}
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
_PROBE_TIMEOUT = 5.0


@dataclass(frozen=True)
class ResolvedModel:
    """The chat model, what summarizes for `/compact` (the same model; `None`: the deterministic summarizer)."""

    name: str
    model: Model
    summarization_model: Any
    max_tokens: int | None = None
    """The context window when the model has no known one (the offline model); else from the model's name."""


def resolve_model(name: str | None) -> ResolvedModel:
    """The model for `--model NAME` (default `openai:gpt-4.1`), or a `CliError` naming what to do."""
    name = (name or os.environ.get("PYDANTIC_DEEP_MODEL") or DEFAULT_MODEL).strip()
    if name == "test":
        return ResolvedModel(name, offline_model(), None, TEST_MODEL_WINDOW)
    provider, _ = parse_model_id(name)
    if provider is None:
        raise CliError(f"unknown model {name!r}: use provider:model, e.g. {MODEL_OPTIONS}", EXIT_USAGE)
    provider = provider.removeprefix("gateway/")
    variables = API_KEY_VARS.get(provider, ())
    if variables and not any(os.environ.get(v) for v in variables):
        raise CliError(
            f"no API key for {name}: set {' or '.join(variables)}, or choose another model with {MODEL_OPTIONS}",
            EXIT_USAGE,
        )
    try:
        model = infer_model(name)
    except UserError as exc:
        raise CliError(f"unknown model {name!r} ({_first_line(exc)}); try {MODEL_OPTIONS}", EXIT_USAGE) from None
    except ImportError:
        raise CliError(
            f'{name} needs the {provider} SDK: pip install "pydantic-ai-slim[{provider}]" (or use --model test)',
            EXIT_USAGE,
        ) from None
    except Exception as exc:  # a provider refusing its configuration: its own message, on one line
        raise CliError(f"cannot use {name}: {_first_line(exc)}", EXIT_USAGE) from None
    return ResolvedModel(name, model, model)


def probe(resolved: ResolvedModel, timeout: float = _PROBE_TIMEOUT) -> None:
    """Open (and close) a TCP connection to the model's endpoint: an unreachable model fails here, before a session
    is created, at no token cost. Skipped behind a proxy (the proxy, not the endpoint, is what is reached)."""
    url = getattr(resolved.model, "base_url", None)
    if not isinstance(url, str) or any(os.environ.get(v) for v in _PROXY_VARS):
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise CliError(
            f"cannot reach {resolved.name} at {url} ({reason}): check the network or the provider's base URL, "
            "or use --model test"
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
