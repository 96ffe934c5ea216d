"""Tool output truncation stays within the token budget on every path."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import ToolReturn

from summarization_pydantic_ai import truncate_output, truncate_text
from summarization_pydantic_ai._tokens import estimate_text_tokens

texts = st.one_of(
    st.text(min_size=0, max_size=3_000),
    st.builds(lambda n, w: "\n".join("x" * w for _ in range(n)), st.integers(1, 400), st.integers(0, 300)),
    st.builds(lambda n: "z" * n, st.integers(0, 60_000)),
)


def _size(value: Any) -> int:
    if isinstance(value, ToolReturn):
        content = value.content if isinstance(value.content, str) else ""
        return _size(value.return_value) + estimate_text_tokens(content)
    return estimate_text_tokens(value if isinstance(value, str) else str(value))


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(min_value=64, max_value=3_000))
def test_text_fits_the_budget(text: str, budget: int) -> None:
    out, cut = truncate_text(text, budget)
    assert estimate_text_tokens(out) <= budget
    assert (cut is None) == (out == text)


@settings(max_examples=200, deadline=None)
@given(texts, texts, st.integers(min_value=64, max_value=2_000))
def test_tool_return_value_and_content_share_the_budget(value: str, content: str, budget: int) -> None:
    out, cut = truncate_output(ToolReturn(return_value=value, content=content), budget)
    assert _size(out) <= budget or cut is None
    if cut is not None:
        assert cut.tokens_after == _size(out)


def test_one_long_line_keeps_its_start_and_end() -> None:
    text = "START" + "z" * 50_000 + "END"
    out, cut = truncate_text(text, 100)
    assert out.startswith("START") and out.endswith("END") and "middle was cut" in out
    assert cut is not None and 80 <= cut.tokens_after <= 100


def test_structured_results_become_json_text_within_budget() -> None:
    rows = [{"id": i, "name": f"row {i}"} for i in range(3_000)]
    out, cut = truncate_output(rows, 300)
    assert isinstance(out, str) and estimate_text_tokens(out) <= 300 and cut is not None
    assert '"id": 0' in out and '"id": 2999' in out
