"""The report of a scripted 200-request session, opened in headless Chromium: drawn, marked, offline.

Run by `.ci/run` (`pytest -m browser`, after `.ci/ensure-chromium` installs the Debian `chromium` when absent);
skipped, saying why, only when no browser can be found. Playwright drives the system Chromium (no browser
download). The screenshot is written to the test's temporary directory.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from summarization_pydantic_ai.report import build_timeline, write_session_report
from summarization_pydantic_ai.store import JsonHistoryStore

from .scripted import run_scripted_session

pytestmark = pytest.mark.browser


def _chromium() -> str:
    try:
        import playwright.sync_api  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        pytest.skip("playwright is not installed: pip install -e '.[dev]'")
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(candidate) if candidate else None
        if found:
            return found
    pytest.skip("no Chromium found and none could be installed: run .ci/ensure-chromium (apt-get install chromium)")


def test_the_report_opens_offline_in_chromium(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    executable = _chromium()
    messages = asyncio.run(run_scripted_session(tmp_path / "base"))
    report = write_session_report(messages, tmp_path / "report.html")
    first = build_timeline(JsonHistoryStore.reader(messages).load_all_sync()).compactions[0]
    screenshot = tmp_path / "session-report.png"
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1120})
            page.on("request", lambda request: requests.append(request.url))
            page.goto(report.as_uri(), wait_until="load")
            assert page.locator("#context-chart").is_visible()
            points = page.eval_on_selector("#context-chart polyline.context", "e => e.points.length")
            width = page.eval_on_selector("#context-chart polyline.context", "e => e.getBBox().width")
            assert points == 200 and width > 800, "one line across the chart, a point per request"
            assert page.locator("#context-chart polyline.threshold").count() == 1
            assert page.eval_on_selector("#cost-chart polyline.cost", "e => e.points.length") == 200
            assert page.locator("#context-chart .marker.compaction").count() == 3
            assert page.locator("#context-chart .marker.eviction").count() == 5
            assert all(page.locator("#context-chart .marker.eviction").nth(i).is_visible() for i in range(5))
            title = page.locator("#context-chart .marker.compaction title").first.text_content() or ""
            assert f"Compaction 1 at request {first.request}:" in title and "→" in title
            page.screenshot(path=str(screenshot))
            page.locator("#context-chart .marker.compaction").first.click()
            assert page.evaluate("location.hash") == "#compaction-1", "a marker leads to its row"
        finally:
            browser.close()
    assert requests == [report.as_uri()], f"the page made network requests: {requests[1:]}"
    assert screenshot.stat().st_size > 10_000
    print(f"screenshot: {screenshot}")
