"""The latest user request in a summary: repeated when it is short, referred to when it is long.

Every compaction path keeps the latest user request verbatim in the working context (in the kept tail, in the
working set, or carried by the summary's own request). A summary that copied a long request as well would hold it
twice (a 30,000-character document delivered as user text would make the compaction grow the context, and even
a paragraph would take room the summary needs for what it alone keeps), so a request longer than
`VERBATIM_REQUEST_CHARS` that stays verbatim is named by a short reference instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.messages import ModelMessage

from .._messages import user_prompts
from .._render import part_text
from ._protocol import SummaryRequest

__all__ = [
    "LATEST_HEADING",
    "VERBATIM_REQUEST_CHARS",
    "latest_request_from_summary",
    "latest_request_reference",
    "latest_user_request",
    "latest_user_request_index",
    "refers_to_latest",
    "request_latest",
    "summary_latest",
]

VERBATIM_REQUEST_CHARS = 500
"""A latest user request up to this many characters is repeated in a summary; a longer one that stays verbatim in
the working context is referred to (see `SummaryRequest.latest_request_kept`)."""

LATEST_HEADING = "## Latest user request\n"
_REFERENCE_START = "(kept verbatim in the conversation after this summary:"


def latest_user_request(messages: Sequence[ModelMessage]) -> str | None:
    """The text of the most recent user prompt in `messages` (the user's words: a document a tool delivered as
    user text beside its result is not a request, see `user_prompts`)."""
    index = latest_user_request_index(messages)
    return None if index is None else part_text(user_prompts(messages, index)[-1])


def latest_user_request_index(messages: Sequence[ModelMessage]) -> int | None:
    """The index of the request holding the user's most recent prompt (see `user_prompts`), or `None`."""
    for index in range(len(messages) - 1, -1, -1):
        if user_prompts(messages, index):
            return index
    return None


def latest_request_from_summary(summary: str | None) -> str | None:
    """The verbatim latest request a structured summary carries in its last section, if it has one (a reference
    to a request kept beside the summary is not the request)."""
    if not summary or LATEST_HEADING not in summary:
        return None
    text = summary.rsplit(LATEST_HEADING, 1)[1].strip()
    if not text or text.lower() == "none" or text.startswith(_REFERENCE_START):
        return None
    return text


def request_latest(request: SummaryRequest) -> str | None:
    """The latest user request a summary of `request` answers to: the one given, else the span's, else the one
    the previous summary repeated."""
    return (
        request.latest_user_request
        or latest_user_request(request.messages)
        or latest_request_from_summary(request.previous_summary)
    )


def refers_to_latest(latest: str | None, *, kept: bool) -> bool:
    """Whether a summary names `latest` by reference instead of repeating it: it is long and stays verbatim."""
    return kept and latest is not None and len(latest) > VERBATIM_REQUEST_CHARS


def latest_request_reference(latest: str) -> str:
    """The short, stable line a summary holds in place of a long latest request (same request, same line)."""
    opening = " ".join(latest[:200].split())[:100]
    return f'{_REFERENCE_START} {len(latest):,} characters, beginning "{opening}…")'


def summary_latest(request: SummaryRequest) -> str:
    """What a summary of `request` puts under its latest-request heading: the request verbatim, a reference to it,
    or "none"."""
    latest = request_latest(request)
    if latest is None or not latest.strip():
        return "none"
    return latest_request_reference(latest) if refers_to_latest(latest, kept=request.latest_request_kept) else latest
