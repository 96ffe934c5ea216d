"""The structured summary prompt and its safe templating.

Only the known placeholders (`{messages}`, `{previous_summary}`, `{focus}`, `{latest_user_request}`) are
replaced, in one pass over the template: braces in the template that are not placeholders stay as they are,
and braces inside the substituted values (code, JSON, a `{` in a user prompt) are never interpreted.
"""

from __future__ import annotations

import re

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "SUMMARIZER_INSTRUCTIONS",
    "TEMPLATE_PLACEHOLDERS",
    "fill_template",
    "validate_template",
]

TEMPLATE_PLACEHOLDERS = ("messages", "previous_summary", "focus", "latest_user_request")

SUMMARIZER_INSTRUCTIONS = (
    "You write the working memory of an AI agent: a summary that replaces part of its conversation. "
    "The agent will continue from your summary alone, so keep every fact it needs and drop chatter. "
    "Never invent facts. Quote identifiers, paths, numbers and error messages exactly."
)

_SECTIONS = """\
Use exactly these sections (markdown headings); write "none" for an empty one:
## Intent
What the user wants overall, and constraints they set.
## Decisions
Choices made and their reasons.
## Artifacts
Files, paths, URLs, identifiers, commands and their results, each with the message id it came from,
e.g. `src/app.py` (msg 12).
## Errors
Failures, their causes, and whether they were resolved.
## Current state
What is done and what is in progress.
## Next steps
What remains, in order.
## Latest user request
The latest user request, verbatim.
"""

DEFAULT_SUMMARY_PROMPT = (
    """\
Summarize the conversation span below so the agent can continue the work without it.
If a previous summary is given, produce ONE updated summary that keeps everything still relevant from it and
adds what the new messages changed.
{focus}
"""
    + _SECTIONS
    + """
<previous_summary>
{previous_summary}
</previous_summary>

<messages>
{messages}
</messages>

<latest_user_request>
{latest_user_request}
</latest_user_request>
"""
)

ALIGNED_SUMMARY_PROMPT = (
    """\
Pause the task: write a summary of the conversation above. It replaces {messages}, and the agent will continue
from your summary alone, so keep every fact it needs and drop chatter. Never invent facts. Quote identifiers,
paths, numbers and error messages exactly. Do not call any tool; answer with the summary only.
If the conversation holds an earlier summary, produce ONE updated summary that keeps everything still relevant
from it and adds what the later messages changed.
{focus}
"""
    + _SECTIONS
    + """
<latest_user_request>
{latest_user_request}
</latest_user_request>
"""
)
"""The instruction appended to the run's own request when the run's model writes the summary (cache-aligned)."""

_PLACEHOLDER = re.compile(r"\{(" + "|".join(TEMPLATE_PLACEHOLDERS) + r")\}")
_ANY_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def validate_template(template: str) -> str:
    """Check a custom summary prompt at construction.

    It must contain `{messages}` (or the summarizer would see nothing); a `{word}` that is not a known
    placeholder is reported, since it is almost always a typo. Other braces are allowed and kept literally.
    """
    if not isinstance(template, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"prompt template must be a str, got {type(template).__name__}")
    if "{messages}" not in template:
        raise ValueError("prompt template must contain the {messages} placeholder")
    unknown = sorted({m for m in _ANY_PLACEHOLDER.findall(template) if m not in TEMPLATE_PLACEHOLDERS})
    if unknown:
        allowed = ", ".join("{" + p + "}" for p in TEMPLATE_PLACEHOLDERS)
        raise ValueError(f"unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}; allowed: {allowed}")
    return template


def fill_template(template: str, values: dict[str, str]) -> str:
    """Replace the known placeholders in one pass; values are inserted literally."""
    return _PLACEHOLDER.sub(lambda match: values.get(match.group(1), ""), template)
