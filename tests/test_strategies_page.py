"""docs/strategies.md holds the presets table the script measures now (the session and presets are deterministic)."""

from __future__ import annotations

from types import ModuleType

from script_loader import ROOT, load_script


def _script() -> ModuleType:
    return load_script("benchmarks/strategies_table.py")


async def test_the_presets_table_of_the_docs_is_current() -> None:
    script = _script()
    rows = await script.measure()
    page = (ROOT / "docs" / "strategies.md").read_text(encoding="utf-8")
    table = script.render(rows)
    assert script.replace_table(page, table) == page, "run: python benchmarks/strategies_table.py"
    assert all(row.valid for row in rows)
    assert all(row.result.summary_requests == 0 for row in rows), "the page's presets never call a model"
    baseline, compressed, *presets = rows
    assert compressed.result.total_request_tokens < baseline.result.total_request_tokens
    assert compressed.result.max_request_tokens > script.WINDOW, "compression alone does not fit the window"
    assert all(row.result.max_request_tokens < script.WINDOW for row in presets)
    assert all(row.result.total_request_tokens < compressed.result.total_request_tokens for row in presets)
