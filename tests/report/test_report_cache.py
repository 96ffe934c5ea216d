"""The report's prompt-cache figures: per request read / written / uncached (reported or estimated), per reduction
its net effect, and the savings line with the cache re-writes counted."""

from __future__ import annotations

import re

from summarization_pydantic_ai.report import render_session_report
from tests.cost.test_cache_costs import GUIDE, compress_new_outputs, compress_seen_outputs, run_session


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


async def test_the_naive_policy_shows_its_rewrites_and_a_negative_net() -> None:
    messages, _ = await run_session(compress_seen_outputs, instructions=GUIDE)
    html = render_session_report(messages, title="naive")
    assert "<h2>Prompt cache</h2>" in html and "<h2>Reductions and the cache</h2>" in html
    text = _text(html)
    assert "read from the prompt cache" in text
    assert "0 requests as the provider reported them, 13 estimated by the simulator" in text
    assert re.search(r"the cache re-writes they caused cost \$[\d.]+: net -\$[\d.]+", text)
    assert len(re.findall(r"at message \d+", text)) == 11
    net = re.findall(r"<td class=n>(-\$[\d.]+)</td></tr>", html)
    assert len(net) == 3  # the rewrites whose re-write cost more than they saved (the last two rewrote everything)


async def test_the_planned_policy_shows_no_rewrite() -> None:
    messages, _ = await run_session(compress_new_outputs, instructions=GUIDE)
    text = _text(render_session_report(messages, title="planned"))
    assert "No request rewrote the cached history." in text
    assert "re-writes they caused" not in text


def test_a_session_without_cache_figures_says_the_cache_was_not_counted() -> None:
    assert "<h2>Prompt cache</h2>" not in render_session_report([], title="empty")
