"""Structure-aware previews (`summarization_pydantic_ai.compression`, used by eviction): detection, content, bounds,
speed and fuzzing.

The inputs are generated to look like real tool outputs: a 300 KB JSON API response of nested records, a
200 KB application log with a few ERROR lines and a Python traceback, a 100 KB CSV export with quoted fields,
a Playwright MCP `browser_snapshot` of a product listing, an HTML page and plain text.
"""

from __future__ import annotations

import doctest
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from summarization_pydantic_ai.compression import PreviewKind, detect_kind, make_preview

KINDS: tuple[PreviewKind, ...] = get_args(PreviewKind)


# --- realistic inputs ---------------------------------------------------------------------------------------


@cache
def api_json() -> str:
    """~300 KB: `{"data": [...users...], "meta": {...}, "links": {...}, "errors": null}`."""
    r = random.Random(1)
    users: list[dict[str, Any]] = []
    size = 0
    while size < 300_000:
        i = len(users)
        user: dict[str, Any] = {
            "id": i,
            "name": f"User {i}",
            "email": f"user{i}@example.com",
            "active": r.random() > 0.3,
            "score": round(r.random() * 100, 2),
            "tags": [r.choice(["a", "b", "vip"]) for _ in range(r.randint(0, 4))],
            "address": {"street": f"{i} Main St", "city": r.choice(["Paris", "Oslo"]), "geo": {"lat": 1.5, "lng": 2}},
        }
        if i % 7 == 0:
            user["nickname"] = None
        users.append(user)
        size += len(json.dumps(user)) + 2
    doc = {
        "data": users,
        "meta": {"page": 1, "per_page": len(users), "total": 12_345},
        "links": {"self": "/users?page=1", "next": "/users?page=2"},
        "errors": None,
    }
    return json.dumps(doc)


@dataclass(frozen=True)
class Log:
    text: str
    error_lines: tuple[int, ...]  # 1-based numbers of the ERROR lines and the traceback's exception line
    traceback_line: int
    lines: int


@cache
def app_log() -> Log:
    """~200 KB of INFO lines, some WARNINGs, four distinct ERROR lines and one traceback."""
    r = random.Random(2)
    lines: list[str] = []
    errors: list[int] = []
    traceback_line = 0
    t = 0
    size = 0
    messages = iter(
        [
            "app.db: connection to replica lost",
            "app.cache: redis timeout after retries",
            "app.worker: job failed",
            "app.http: upstream returned malformed body",
        ]
    )
    while size < 200_000:
        t += r.randint(0, 3)
        ts = f"2024-05-01 {10 + t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d},{r.randint(0, 999):03d}"
        k = len(lines)
        if k in (400, 1100, 1800, 2500):
            lines.append(f"{ts} ERROR {next(messages)}")
            errors.append(len(lines))
            if k == 1800:
                traceback_line = len(lines) + 1
                lines += [
                    "Traceback (most recent call last):",
                    '  File "/app/worker.py", line 88, in run',
                    "    result = handler(job)",
                    '  File "/app/handlers.py", line 12, in handler',
                    "    raise ValueError('bad payload')",
                    "ValueError: bad payload",
                ]
                errors.append(len(lines))
        elif r.random() < 0.01:
            lines.append(f"{ts} WARNING app.http: slow response {r.randint(500, 3000)}ms on /api/items")
        else:
            lines.append(f"{ts} INFO app.http: GET /api/items/{r.randint(1, 9999)} 200 {r.randint(1, 90)}ms")
        size += len(lines[-1]) + 1
    return Log("\n".join(lines) + "\n", tuple(errors), traceback_line, len(lines))


@cache
def orders_csv() -> tuple[str, int]:
    """~100 KB with a header row and quoted fields holding commas; returns (text, data rows)."""
    r = random.Random(3)
    rows = ["order_id,customer,email,amount,currency,created_at,status"]
    size = len(rows[0])
    while size < 100_000:
        i = len(rows)
        rows.append(
            f'{1000 + i},"Doe, Jane {i}",jane{i}@example.com,{r.random() * 500:.2f},EUR,'
            f"2024-04-{1 + i % 28:02d}T12:00:00Z,{r.choice(['paid', 'refunded', 'pending'])}"
        )
        size += len(rows[-1]) + 1
    return "\n".join(rows) + "\n", len(rows) - 1


@cache
def aria_snapshot(products: int = 300) -> str:
    """A Playwright MCP `browser_snapshot` of a product listing (page facts, then the YAML aria tree)."""
    refs = iter(range(1, 1_000_000))
    out = [
        "### Page state",
        "- Page URL: https://shop.example/products?page=1",
        "- Page Title: Products - Example Shop",
        "- Page Snapshot:",
        "```yaml",
    ]

    def add(depth: int, line: str) -> None:
        out.append("  " * depth + "- " + line.replace("REF", f"ref=e{next(refs)}"))

    add(0, "generic [REF]:")
    add(1, "banner [REF]:")
    add(2, 'link "Example Shop" [REF] [cursor=pointer]:')
    add(3, "/url: /")
    add(2, 'navigation "Main" [REF]:')
    add(3, "list [REF]:")
    for name in ("Home", "Products", "Deals", "Contact"):
        add(4, "listitem [REF]:")
        add(5, f'link "{name}" [REF] [cursor=pointer]:')
        add(6, f"/url: /{name.lower()}")
    add(2, 'searchbox "Search products" [REF]')
    add(2, 'button "Search" [REF] [cursor=pointer]')
    add(1, "main [REF]:")
    add(2, 'heading "Products" [level=1] [REF]')
    add(2, 'form "Filters" [REF]:')
    add(3, 'checkbox "In stock only" [checked] [REF]')
    add(3, 'combobox "Sort by" [REF]: Price')
    add(2, "list [REF]:")
    for p in range(products):
        add(3, "listitem [REF]:")
        add(4, "generic [REF]:")
        add(5, f'img "Product {p}" [REF]')
        add(5, f'heading "Product {p}" [level=2] [REF]')
        add(5, f"paragraph [REF]: Solid item, {p % 90 + 9} EUR")
        add(5, 'button "Add to cart" [REF] [cursor=pointer]')
        add(5, 'link "Details" [REF] [cursor=pointer]:')
        add(6, f"/url: /p/{p}")
    add(1, "contentinfo [REF]:")
    add(2, 'link "Privacy" [REF] [cursor=pointer]:')
    add(3, "/url: /privacy")
    out.append("```")
    return "\n".join(out)


@cache
def html_page(products: int = 200) -> str:
    items = "\n".join(
        f'<li class="card"><h2>Product {p}</h2><p>Nice &amp; cheap</p>'
        f'<button type="button" data-id="{p}">Add to cart</button> <a href="/p/{p}">Details</a></li>'
        for p in range(products)
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><title>Products &mdash; Example Shop</title><meta charset="utf-8">
<script>if (a < b && c > d) {{ document.write("<button>not a tag</button>"); }}</script>
<style>.card > h2 {{ color: red }}</style></head>
<body><header><a href="/"><img src="/logo.png" alt="Example Shop"></a>
<nav aria-label="Main"><ul><li><a href="/">Home</a><li><a href="/products">Products</a></ul></nav>
<form action="/search" role="search"><input type="search" name="q" placeholder="Search products">
<input type="hidden" name="csrf" value="x"><button type="submit">Search</button></form></header>
<main><h1>Products</h1><!-- <button>commented out</button> -->
<form id="filters"><label><input type="checkbox" name="stock" checked> In stock only</label>
<select name="sort"><option>Price<option>Name</select></form>
<ul class="grid">{items}</ul></main>
<footer><a href="/privacy">Privacy</a></footer></body></html>"""


@cache
def prose(lines: int = 400) -> str:
    return "\n".join(f"Paragraph {i}: the quick brown fox jumps over the lazy dog." for i in range(1, lines + 1))


INPUTS: dict[str, Callable[[], str]] = {
    "json": api_json,
    "log": lambda: app_log().text,
    "csv": lambda: orders_csv()[0],
    "snapshot": aria_snapshot,
    "html": html_page,
    "text": prose,
}


def numbered(preview: str, line: int) -> bool:
    """Whether the preview shows source line `line` (`  123| ...`)."""
    return re.search(rf"^\s*{line}\| ", preview, re.MULTILINE) is not None


# --- detection ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("json", "json"),
        ("log", "log"),
        ("csv", "csv"),
        ("snapshot", "snapshot"),
        ("html", "snapshot"),
        ("text", "text"),
    ],
)
def test_detects_realistic_inputs(name: str, kind: PreviewKind) -> None:
    assert detect_kind(INPUTS[name]()) == kind


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ("", "text"),
        ("   \n\n", "text"),
        ("42", "text"),  # a JSON scalar is not worth a JSON preview
        ('"just a string"', "text"),
        ("[1, 2, 3]", "json"),
        ('{"a": 1}', "json"),
        ('{"a": 1}\n{"a": 2}\n{"a": 3}\n', "json"),  # JSON lines
        ('{"a": 1,\n "b": ', "text"),  # truncated JSON is not a table either
        ("a,b,c\n1,2,3\n4,5,6\n", "csv"),
        ("name\tqty\tprice\nfoo\t1\t2.5\nbar\t3\t1.0\n", "csv"),
        ("Hello, world.\nI went home, then slept.\nThe end.\n", "text"),
        ("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n", "text"),  # a markdown table
        ("# Title\n\n- item one\n- link to the docs\n- main idea\n", "text"),  # a markdown list
        ("INFO:root:start\nWARNING:root:careful\nERROR:root:boom\n", "log"),
        ("2024-05-01T10:00:00Z,INFO,started\n2024-05-01T10:00:01Z,ERROR,boom\n2024-05-01T10:00:02Z,INFO,ok\n", "log"),
        ("[LOG] ready @ http://x/a.js:1\n[WARNING] slow @ http://x/a.js:2\n[ERROR] 404 @ http://x/i.png:0\n", "log"),
        ("$ npm test\n> jest\nFAIL src/a.test.js\nTests: 1 failed\n", "log"),
        ('Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nNameError: foo\n', "log"),
        ('- button "OK" [ref=e1]\n- link "Home" [ref=e2]\n- textbox "Email" [ref=e3]\n', "snapshot"),
        ('uid=1_0 RootWebArea "Ex"\n  uid=1_1 button "OK"\n  uid=1_2 link "Home"\n', "snapshot"),
        ('{"role": "WebArea", "name": "Ex", "children": [{"role": "button", "name": "OK"}]}', "snapshot"),
        ("<!doctype html><html><body><p>hi</p></body></html>", "snapshot"),
    ],
)
def test_detects_small_inputs(content: str, kind: PreviewKind) -> None:
    assert detect_kind(content) == kind


# --- previews of the realistic inputs -----------------------------------------------------------------------


def test_json_preview_shows_shape_keys_and_first_items() -> None:
    content = api_json()
    doc = json.loads(content)
    preview = make_preview(content)
    assert len(preview) <= 2_000
    assert preview.splitlines()[0] == f"JSON object, 4 keys, {len(content):,} chars"
    for key in doc:
        assert f'"{key}":' in preview
    assert f'"data": array[{len(doc["data"]):,}] of object' in preview
    assert "nesting depth 5" in preview
    assert "nickname:null" in preview  # a key only some records have, with how many have it
    assert f"$.data: {len(doc['data']):,} items" in preview
    for i in range(3):
        assert f'[{i}] {{"id": {i}, "name": "User {i}"' in preview
    last = len(doc["data"]) - 1
    assert f'[{last}] {{"id": {last},' in preview


def test_json_array_and_json_lines_previews() -> None:
    records = [{"id": i, "kind": "event", "payload": {"n": i}} for i in range(2_000)]
    array = make_preview(json.dumps(records))
    assert array.startswith("JSON array, 2,000 items,")
    assert "id:int, kind:str, payload:object" in array
    assert '[0] {"id": 0, "kind": "event", "payload": {"n": 0}}' in array

    lines = "\n".join(json.dumps(r) for r in records[:50]) + "\nnot json\n" + json.dumps(records[50])
    preview = make_preview(lines)
    assert preview.startswith("JSON lines, 52 records,")
    assert "1 line not valid JSON (line 51)" in preview


def test_structured_json_log_lists_error_records_and_tail() -> None:
    records = [
        {"level": 50 if i in (100, 900) else 30, "time": 1_714_550_400_000 + i, "msg": f"request {i}"}
        for i in range(3_000)
    ]
    preview = make_preview("\n".join(json.dumps(r) for r in records) + "\n")
    assert preview.startswith("JSON lines, 3,000 records,")
    assert "levels (level): ERROR 2 · INFO 2,998" in preview
    assert numbered(preview, 101) and numbered(preview, 901)  # the error records, by line
    assert '"msg": "request 900"' in preview
    assert numbered(preview, 3_000) and numbered(preview, 2_996)  # the tail


def test_csv_preview_shows_header_exact_row_count_and_first_rows() -> None:
    content, rows = orders_csv()
    preview = make_preview(content)
    assert len(preview) <= 2_000
    assert preview.splitlines()[0] == f"CSV, {rows:,} rows × 7 columns, {len(content):,} chars"
    assert f"{rows:,} data rows" in preview
    for column in ("order_id (int)", "customer (text)", "amount (float)", "created_at (date)", "status (text)"):
        assert column in preview
    lines = content.splitlines()
    for number in (2, 3, 4, len(lines)):  # the first three rows and the last one, with their line numbers
        assert numbered(preview, number)
        assert lines[number - 1][:40] in preview


def test_csv_preview_reports_ragged_rows_and_tsv() -> None:
    rows = [f"{i}\t{i * 2}\t{i * 3}" for i in range(20)]
    rows[11] = "11\t22"
    preview = make_preview("a\tb\tc\n" + "\n".join(rows))
    assert preview.startswith("TSV, 20 rows × 3 columns")
    assert "1 row with a different number of fields (first at line 13; widest 3)" in preview


def test_log_preview_lists_every_error_line_and_the_tail() -> None:
    log = app_log()
    preview = make_preview(log.text)
    assert len(preview) <= 2_000
    assert preview.splitlines()[0] == f"Log, {log.lines:,} lines, {len(log.text):,} chars"
    for line in log.error_lines:
        assert numbered(preview, line), line
    assert numbered(preview, log.traceback_line)
    assert "ValueError: bad payload" in preview
    assert 'File "/app/handlers.py", line 12, in handler' in preview  # where it was raised
    assert "levels: ERROR 4 · WARN" in preview
    assert "time: 2024-05-01 10:" in preview
    for line in range(log.lines - 9, log.lines + 1):  # the last 10 lines
        assert numbered(preview, line)


def test_log_preview_groups_repeated_errors_and_caps_distinct_ones() -> None:
    lines = [f"2024-05-01 10:00:{i % 60:02d} INFO tick {i}" for i in range(300)]
    for i in range(0, 300, 10):
        lines[i] = f"2024-05-01 10:00:{i % 60:02d} ERROR connection refused (attempt {i})"
    for i in range(5, 300, 20):
        lines[i] = f"2024-05-01 10:00:{i % 60:02d} ERROR failure kind {chr(65 + i // 20)}"
    preview = make_preview("\n".join(lines))
    assert len(preview) <= 2_000
    assert "×30 at lines 1, 11, 21, …, 281, 291" in preview
    assert "more distinct error" in preview  # 16 distinct errors: the first 4 and the last 6 are shown


def test_aria_snapshot_preview_lists_interactive_elements_with_refs() -> None:
    content = aria_snapshot()
    preview = make_preview(content)
    assert len(preview) <= 2_000
    assert preview.startswith("Accessibility snapshot (Playwright aria), ")
    assert "page: Products - Example Shop — https://shop.example/products?page=1" in preview
    assert "interactive: 306 link, 301 button, 1 searchbox, 1 checkbox, 1 combobox" in preview
    for name in ("Home", "Products", "Deals", "Contact"):
        assert re.search(rf'link "{name}" \[ref=e\d+\] → /{name.lower()}', preview)
    for element in ('searchbox "Search products"', 'button "Search"', 'checkbox "In stock only" [checked]'):
        assert re.search(re.escape(element) + r".*\[ref=e\d+\]", preview)
    assert 'combobox "Sort by"' in preview
    assert "[cursor=pointer]" not in preview  # noise
    # the listing is collapsed: three shown, then counted with the ref range
    assert re.search(r'button "Add to cart" ×300 \[ref=e\d+…e\d+\]', preview)
    assert preview.count('button "Add to cart" [ref=') == 3
    assert re.search(r'link "Privacy" \[ref=e\d+\] → /privacy', preview)  # the footer is still there


def test_snapshot_depth_counts_what_lies_deeper() -> None:
    shallow = make_preview(aria_snapshot(), snapshot_depth=1)
    assert "outline (interactive elements under their landmarks, 1 level deep)" in shallow
    assert re.search(r"- banner \[ref=e\d+\]  \(\+7 deeper: 5 link, 1 searchbox, 1 button\)", shallow)
    assert re.search(r"- main \[ref=e\d+\]  \(\+602 deeper: 300 button, 300 link, 1 checkbox, 1 combobox\)", shallow)
    assert 'link "Home"' not in shallow


def test_html_preview_lists_controls_and_skips_scripts_and_comments() -> None:
    content = html_page()
    preview = make_preview(content)
    assert len(preview) <= 2_000
    assert preview.startswith("HTML page, ")
    assert "page: Products — Example Shop" in preview
    assert '<a href="/">Example Shop</a>' in preview  # an image link is named by its alt text
    assert '<a href="/products">Products</a>' in preview
    assert '<input name="q" type="search" placeholder="Search products">' in preview
    assert '<button type="submit">Search</button>' in preview
    assert '<input name="stock" type="checkbox" checked>' in preview
    assert "csrf" not in preview  # hidden inputs are not controls
    assert "not a tag" not in preview
    assert "commented out" not in preview
    assert 'button "Add to cart" ×200' in preview


def test_text_preview_shows_five_head_and_five_tail_lines() -> None:
    content = prose()
    preview = make_preview(content)
    lines = preview.splitlines()
    assert lines[0] == f"Text, 400 lines, {len(content):,} chars"
    assert [line.split("| ", 1)[1] for line in lines[1:6]] == content.splitlines()[:5]
    assert lines[6] == "… 390 lines omitted (lines 6–395) …"
    assert [line.split("| ", 1)[1] for line in lines[7:]] == content.splitlines()[-5:]


def test_a_single_huge_line_keeps_both_ends() -> None:
    preview = make_preview("START" + "x" * 300_000 + "END")
    assert len(preview) <= 2_000
    assert "START" in preview
    assert preview.endswith("END")
    assert "chars) …" in preview


# --- kinds, bounds, speed -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "kind", "header"),
    [
        ("plain words", "json", "Text (not valid JSON), 1 line"),
        ("no delimiters here\nat all\n", "csv", "Text (no delimiter found)"),
        ("nothing like a page", "snapshot", "Text (not a recognized snapshot)"),
        ("a,b\n1,2\n", "log", "Log, 2 lines"),
        ('{"a": 1}', "text", "Text, 1 line"),
        ('{"a": 1}', "unknown", "JSON object, 1 key"),  # an unknown kind is treated as auto
    ],
)
def test_forced_kinds(content: str, kind: Any, header: str) -> None:
    assert make_preview(content, kind).startswith(header)


@pytest.mark.parametrize("name", list(INPUTS))
def test_detect_then_preview_equals_auto(name: str) -> None:
    content = INPUTS[name]()
    kind = detect_kind(content)
    assert make_preview(content, kind) == make_preview(content)


@pytest.mark.parametrize("name", list(INPUTS))
@pytest.mark.parametrize("max_chars", [0, 1, 10, 60, 200, 500, 1_000, 5_000])
def test_previews_stay_within_max_chars(name: str, max_chars: int) -> None:
    preview = make_preview(INPUTS[name](), max_chars=max_chars)
    assert len(preview) <= max_chars
    if max_chars >= 200:
        assert len(preview.splitlines()[0]) > 10  # the header survives
        assert "preview failed" not in preview


def test_docstring_examples_hold() -> None:
    from summarization_pydantic_ai.compression import _previews

    assert doctest.testmod(_previews).failed == 0


def test_pathological_markup_is_linear() -> None:
    # Timing belongs in benchmarks; a quadratic parser would make this test take minutes rather than milliseconds.
    content = "<html><body>" + '<a href="x' * 20_000
    preview = make_preview(content, "snapshot")
    assert preview.startswith("HTML page, ")


def test_deeply_nested_json_does_not_raise() -> None:
    assert make_preview("[" * 100_000 + "]" * 100_000).startswith("Text, 1 line")
    nested = make_preview(json.dumps(json.loads("[" * 500 + "]" * 500)))
    assert nested.startswith("JSON array, 1 item") and "nesting depth 500" in nested


# --- fuzzing ------------------------------------------------------------------------------------------------

FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_fragments = st.sampled_from(
    [
        "2024-05-01 10:00:00,123 ",
        "ERROR ",
        "INFO ",
        "[WARNING] ",
        "Traceback (most recent call last):",
        '  File "x.py", line 3, in f',
        "ValueError: x",
        "$ ls",
        "- button ",
        '"Submit" ',
        "[ref=e12]",
        "  ",
        "- /url: /a",
        "uid=1_2 link ",
        "<a href='/x'>",
        "</a>",
        "<!--",
        "<script>",
        "<div role=button>",
        "{",
        "}",
        "[",
        "]",
        '"k": ',
        ",",
        "\t",
        ";",
        '"',
        "\n",
        "\r\n",
        "\x00",
        "\u2028",
        "🙂",
    ]
)
structured_text = st.lists(st.one_of(_fragments, st.text(max_size=8)), max_size=60).map("".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
).map(json.dumps)


@pytest.mark.parametrize("kind", KINDS)
@FUZZ
@given(content=st.text(), max_chars=st.integers(min_value=-5, max_value=3_000))
def test_fuzz_arbitrary_text(kind: PreviewKind, content: str, max_chars: int) -> None:
    preview = make_preview(content, kind, max_chars=max_chars)
    assert len(preview) <= max(0, max_chars)
    assert "preview failed" not in preview  # the safety net was not needed
    if kind == "auto":
        assert detect_kind(content) in KINDS[1:]


@pytest.mark.parametrize("kind", KINDS)
@FUZZ
@given(
    content=st.one_of(structured_text, json_values),
    max_chars=st.integers(min_value=0, max_value=2_500),
    depth=st.integers(min_value=-1, max_value=6),
)
def test_fuzz_structured_text(kind: PreviewKind, content: str, max_chars: int, depth: int) -> None:
    preview = make_preview(content, kind, max_chars=max_chars, snapshot_depth=depth)
    assert len(preview) <= max_chars
    assert "preview failed" not in preview
