"""What `AgentDrivenCompression` asks the agent near the limit: the request template, its placeholders and the tool
the agent calls when its memory is written."""

from __future__ import annotations

__all__ = ["DEFAULT_COMPRESSION_REQUEST", "TOOL_NAME", "check_request_template", "compression_request"]

TOOL_NAME = "compression_complete"

DEFAULT_COMPRESSION_REQUEST = """\
[Context compression request] Your context is {pct:.0%} full and is about to be compacted. Before you go on:
1. With your file tools, write a short-term memory to `{path}`: the user's latest request, what you have done so \
far, decisions and why, the files you created or changed, errors and how they were fixed, the current state and \
the next steps. Keep it under about {limit} tokens.
{long_term}Then call `{tool}` (after the write has returned). The conversation so far will then be replaced by that \
file plus the most recent messages, so write down everything you need to continue the task."""
"""The request shown to the agent. Placeholders: `{path}`, `{long_term}`, `{limit}`, `{tool}`, `{pct}`."""

_LONG_TERM = (
    "2. Optionally, add what should outlive this task (conventions, the user's preferences, lasting decisions) to "
    "`{path}`; that file is not replaced.\n"
)


def compression_request(template: str, *, path: str, long_term_path: str | None, limit: int, pct: float) -> str:
    """`template` filled in: the memory file at `path` (of about `limit` tokens), the optional long-term notes at
    `long_term_path`, and how full the context is (`pct`, a fraction)."""
    long_term = _LONG_TERM.format(path=long_term_path) if long_term_path else ""
    return template.format(path=path, long_term=long_term, limit=limit, tool=TOOL_NAME, pct=pct)


def check_request_template(template: str, *, path: str, long_term_path: str | None) -> None:
    """Refuse a template with an unknown placeholder (or a malformed one) when it is set, not at the first
    compression: it is filled in as for a request at the start of a run."""
    try:
        compression_request(template, path=path, long_term_path=long_term_path, limit=1, pct=0.0)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"request_template: {exc!r}; placeholders are {{path}}, {{long_term}}, {{limit}}, {{tool}}, {{pct}}"
        ) from exc
