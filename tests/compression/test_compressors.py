"""Golden tests of the content compressors on real-shaped inputs: a 2,000-node accessibility tree (Playwright aria
and JSON), a 5,000-line browser console log with repeats and 3 errors, a 300 KB JSON API response.

What a user relies on: every interactive element (with its ref) and every error line survives, the output is much
smaller, the first line says what was dropped, and compressing again changes nothing. The sizes asserted here are
the ones recorded in docs/processors/compression.md."""

from __future__ import annotations

import doctest
import json
import random
import re
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_previews import api_json, aria_snapshot, html_page

from summarization_pydantic_ai.compression import (
    CompressionResult,
    compress,
    compress_json,
    compress_log,
    compress_snapshot,
    compress_text,
)

_INTERACTIVE = ("link", "button", "textbox", "searchbox", "checkbox", "combobox", "radio", "switch", "tab")


# --- inputs ---------------------------------------------------------------------------------------------------


@cache
def deep_aria_tree(nodes: int = 2_000) -> tuple[str, list[str]]:
    """A Playwright aria snapshot of about `nodes` nodes, nested the way real pages are (generic wrappers 6 to 9
    deep), and the lines of its interactive elements. Cards hold a heading, an image, text, a link and a button;
    a form holds inputs; a footer holds links."""
    r = random.Random(7)
    refs = iter(range(1, 10**6))
    lines: list[str] = ["- Page URL: https://shop.example/search?q=shoes", "- Page Title: Shoes - Example Shop"]
    interactive: list[str] = []

    def add(depth: int, text: str) -> None:
        line = "  " * depth + "- " + text.replace("REF", f"ref=e{next(refs)}")
        lines.append(line)
        if text.split(" ", maxsplit=1)[0].rstrip(":") in _INTERACTIVE:
            interactive.append(line.strip())

    add(0, "generic [REF]:")
    add(1, "banner [REF]:")
    add(2, "generic [REF]:")
    add(3, 'link "Example Shop" [REF] [cursor=pointer]:')
    add(4, "/url: /")
    add(3, 'searchbox "Search" [REF]: shoes')
    add(3, 'button "Go" [REF] [cursor=pointer]')
    add(1, "main [REF]:")
    add(2, 'form "Filters" [REF]:')
    for name in ("Size", "Colour", "Brand"):
        add(3, "generic [REF]:")
        add(4, f'combobox "{name}" [REF]: Any')
    add(3, 'checkbox "In stock" [checked] [REF]')
    add(3, 'textbox "Max price" [REF]')
    card = 0
    while len(lines) < nodes - 12:
        depth = 2 + r.randint(0, 3)  # wrappers of varying depth, as frameworks produce
        for d in range(2, depth):
            add(d, "generic [REF]:")
        add(depth, "article [REF]:")
        add(depth + 1, f'heading "Shoe model {card}" [level=2] [REF]')
        add(depth + 1, f'img "Shoe {card}" [REF]')
        add(depth + 1, "generic [REF]:")
        add(depth + 2, f"paragraph [REF]: Leather, {r.randint(40, 200)} EUR, {r.randint(1, 5)} stars")
        add(depth + 2, "text: Free delivery")
        add(depth + 1, f'link "Shoe model {card} details" [REF] [cursor=pointer]:')
        add(depth + 2, f"/url: /p/{card}")
        add(depth + 1, f'button "Add shoe {card} to cart" [REF] [cursor=pointer]')
        card += 1
    add(1, "contentinfo [REF]:")
    for name in ("Privacy", "Terms", "Contact"):
        add(2, "generic [REF]:")
        add(3, f'link "{name}" [REF] [cursor=pointer]:')
        add(4, f"/url: /{name.lower()}")
    add(2, 'radio "Dark mode" [REF]')
    add(2, 'switch "Newsletter" [REF]')
    return "\n".join(lines), interactive


def _ax_node(role: str, name: str = "", children: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"role": role, "name": name, **extra}
    if children:
        node["children"] = children
    return node


@cache
def ax_tree_json(cards: int = 250) -> tuple[str, int]:
    """A JSON accessibility tree (CDP style) of 2,000+ nodes, and its number of interactive nodes."""
    items = [
        _ax_node(
            "generic",
            children=[
                _ax_node(
                    "article",
                    children=[
                        _ax_node("heading", f"Item {i}", level=2),
                        _ax_node("StaticText", f"Item {i} costs {i % 90 + 10} EUR"),
                        _ax_node("link", f"Item {i}", ref=f"n{i}a"),
                        _ax_node("button", f"Buy item {i}", ref=f"n{i}b"),
                        _ax_node("generic", children=[_ax_node("image", f"Item {i}")]),
                    ],
                )
            ],
        )
        for i in range(cards)
    ]
    main = _ax_node("main", children=[_ax_node("textbox", "Search", ref="s1", value=""), *items])
    root = _ax_node("RootWebArea", "Items", children=[main])
    return json.dumps(root), 1 + 2 * cards


@cache
def console_log(lines: int = 5_000) -> tuple[str, list[str]]:
    """A browser console transcript (`browser_console_messages`): heartbeats repeated hundreds of times, network
    chatter, a few warnings and exactly 3 errors (one with a stack trace). Returns (text, the error lines)."""
    r = random.Random(11)
    out: list[str] = ["$ playwright test checkout.spec.ts", "Running 1 test using 1 worker"]
    errors = {
        1_234: "[ERROR] Failed to load resource: the server responded with a status of 404 () @ https://shop.example/img/hero.webp:0",
        2_500: "[ERROR] Uncaught TypeError: Cannot read properties of undefined (reading 'price') @ https://shop.example/app.js:812",
        4_321: "[ERROR] Checkout failed: payment provider timeout after 30000ms @ https://shop.example/checkout.js:77",
    }
    while len(out) < lines - 5:
        i = len(out)
        if i in errors:
            out.append(errors[i])
            if i == 2_500:
                out += [
                    "    at renderCart (https://shop.example/app.js:812:31)",
                    "    at https://shop.example/app.js:90:7",
                ]
        elif 1_000 <= i < 1_200:
            out.append("[LOG] polling cart status")  # one message repeated 200 times in a row
        elif r.random() < 0.01:
            out.append(f"[WARNING] Slow network request {r.randint(500, 3_000)}ms @ https://shop.example/api/cart")
        elif r.random() < 0.5:
            out.append(f"[LOG] heartbeat {i} ok @ https://shop.example/app.js:12")
        else:
            out.append(f"[DEBUG] GET /api/items/{r.randint(1, 9_999)} 200 in {r.randint(1, 90)}ms")
    out += ["[LOG] test finished", "  1 failed", "    checkout.spec.ts:14 › pays with card", "  Ran 1 test", "done"]
    return "\n".join(out) + "\n", list(errors.values())


# --- snapshots --------------------------------------------------------------------------------------------------


def test_aria_tree_of_2000_nodes_keeps_every_interactive_element_with_its_ref() -> None:
    content, interactive = deep_aria_tree()
    assert content.count("\n") + 1 >= 2_000
    result = compress_snapshot(content, depth=4)
    text = result.text
    out_lines = {line.strip() for line in text.splitlines()}
    for line in interactive:
        assert line.replace(" [cursor=pointer]", "") in out_lines, line  # name, ref, state, value: all there
    for card in (0, 50, 100):
        assert f'heading "Shoe model {card}" [level=2]' in text  # headings name the cards' controls
        assert re.search(rf'link "Shoe model {card} details" \[ref=e\d+\]:\n +- /url: /p/{card}\n', text)
    for line in text.split("\n")[1:]:  # below the depth, only what the model acts on and what names it
        if line.startswith(" " * 8):
            assert re.match(r" +- (?:link|button|textbox|combobox|heading|/url)\b", line), line
    assert text.startswith("[compressed snapshot (Playwright aria), depth 4: ")
    assert f"every interactive element kept ({len(interactive):,})" in text.splitlines()[0]
    header = text.splitlines()[0]
    assert all(re.search(rf"deeper elements dropped \(.*\d {role}\b", header) for role in ("paragraph", "generic"))
    assert "- Page URL: https://shop.example/search?q=shoes" in text  # page facts are kept
    assert (result.chars_before, result.chars_after) == (len(content), len(text))
    assert result.chars_after < result.chars_before * 0.6
    assert compress_snapshot(text, depth=4) == CompressionResult(text, "snapshot", len(text), len(text))


def test_lower_depth_compresses_more_and_still_keeps_every_interactive_element() -> None:
    content, interactive = deep_aria_tree()
    sizes = [compress_snapshot(content, depth=depth).chars_after for depth in (8, 6, 4, 2)]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < sizes[0]
    shallow = compress_snapshot(content, depth=1).text
    refs = set(re.findall(r"\[ref=(e\d+)\]", shallow))
    assert all(re.search(r"\[ref=(e\d+)\]", line)[1] in refs for line in interactive)  # type: ignore[index]


def test_json_accessibility_tree_keeps_every_interactive_node() -> None:
    content, interactive = ax_tree_json()
    assert json.loads(content) and content.count('"role"') >= 2_000
    result = compress_snapshot(content, depth=3)
    text = result.text
    assert text.startswith("[compressed snapshot (JSON accessibility tree), depth 3: ")
    assert len(re.findall(r'- (?:link|button|textbox) "', text)) == interactive
    assert '- button "Buy item 249" [ref=n249b]' in text
    assert '- heading "Item 7" [level=2]' in text
    assert "StaticText" not in text.split("\n", 1)[1] and "image" not in text.split("\n", 1)[1]
    assert result.chars_after < result.chars_before / 2
    assert compress_snapshot(text).text == text


def test_playwright_mcp_listing_and_html_page() -> None:
    listing = compress_snapshot(aria_snapshot(), depth=3)
    assert listing.text.count('button "Add to cart" [ref=') == 300  # every one: the model clicks them by ref
    assert "[cursor=pointer]" not in listing.text
    page = compress_snapshot(html_page(), depth=3)
    assert page.text.startswith("[compressed snapshot (HTML page), depth 3: ")
    assert page.text.count("Add to cart</button>") == 200
    assert page.text.count('<a href="/p/') == 200


def test_not_a_snapshot_and_nothing_below_the_depth_come_back_unchanged() -> None:
    assert not compress_snapshot("just some words\nand more").changed
    small = '- button "OK" [ref=e1]\n- link "Home" [ref=e2]\n- textbox "Email" [ref=e3]'
    assert compress_snapshot(small).text == small
    with pytest.raises(ValueError, match="depth must be >= 1"):
        compress_snapshot(small, depth=0)


# --- logs -------------------------------------------------------------------------------------------------------


def test_console_log_of_5000_lines_keeps_every_error_line_and_the_tail() -> None:
    content, errors = console_log()
    lines = content.splitlines()
    assert len(lines) == 5_000
    result = compress_log(content)
    text = result.text
    out = text.splitlines()
    for error in errors:
        assert error in out  # verbatim, whole
    assert "    at renderCart (https://shop.example/app.js:812:31)" in out  # the stack under the error
    assert out[-40:] == lines[-40:]  # the tail, verbatim
    assert out[1:3] == lines[:2]  # the head: the command run
    assert "[LOG] polling cart status\n… ×200 similar lines (1,001–1,200)" in text  # a run in the middle, once
    assert text.count("[LOG] polling cart status") == 1
    assert "[WARNING] Slow network request" in text  # distinct warnings are kept once each
    header = out[0]
    assert header.startswith("[compressed log: 5,000 → ")
    assert "3 errors kept" in header
    assert result.chars_after < result.chars_before / 20
    assert compress_log(text).text == text


def test_repeated_lines_collapse_with_their_count() -> None:
    lines = ["$ npm run dev"] + ["[LOG] polling cart status"] * 200 + ["[ERROR] boom"] + ["[LOG] tick 1"] * 5
    result = compress_log("\n".join(lines), head=300, tail=0)
    out = result.text.splitlines()
    assert out[1:4] == ["$ npm run dev", "[LOG] polling cart status", "… ×200 similar lines (2–201)"]
    assert "[ERROR] boom" in out
    assert out[-2:] == ["[LOG] tick 1", "… ×5 similar lines (203–207)"]


def test_the_tail_is_kept_verbatim_and_a_run_through_head_and_middle_is_shown_once_with_its_count() -> None:
    lines = (
        ["$ deploy"]
        + [f"[debug] frame {i % 7} took {i % 7 + 3}ms" for i in range(300)]
        + [f"upload attempt {k} of 4 failed" for k in (1, 2, 3)]
        + [f"checkout step {k} rendered" for k in range(5)]
    )
    text = compress_log("\n".join(lines)).text
    assert "checkout step 4 rendered" in text  # the example
    out = text.splitlines()
    assert out[-40:] == lines[-40:]  # never collapsed, though 32 of them repeat the debug line
    # lines 2-269 (the head's 9 and the middle's 259) are one run: its first line and its count, once
    assert out[1:4] == ["$ deploy", "[debug] frame 0 took 3ms", "… ×268 similar lines (2–269)"]
    assert len(out) == 1 + 3 + 40
    _assert_accounts_for_every_line(text, lines)


def test_a_line_repeated_1000_times_in_the_middle_is_shown_with_its_count() -> None:
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    filler = [f"compiled {a}/{b}.c" for a in words for b in words]  # 100 distinct lines, no repeats
    lines = ["$ make"] + filler + ["waiting for lock on build/.lock (pid 4242)"] * 1_000 + filler + ["done"]
    text = compress_log("\n".join(lines)).text
    out = text.splitlines()
    assert "waiting for lock on build/.lock (pid 4242)\n… ×1,000 similar lines (102–1,101)" in text
    assert text.count("waiting for lock") == 1
    assert out[-40:] == lines[-40:]
    _assert_accounts_for_every_line(text, lines)


_GAP = re.compile(r"… ([\d,]+) lines? omitted \(([\d,]+)–([\d,]+)\) …")
_RUN = re.compile(r"… ×([\d,]+) similar lines \(([\d,]+)–([\d,]+)\)")


def _numbers(m: re.Match[str]) -> list[int]:
    return [int(g.replace(",", "")) for g in m.groups()]


def _assert_accounts_for_every_line(text: str, lines: list[str]) -> None:
    """Reads the output back: every input line is shown verbatim, in a run's count or in a gap's, in order and
    exactly once; every run covers lines similar to its first one (digits aside)."""
    from summarization_pydantic_ai.compression._log import canonical_line

    nxt = 0  # the 0-based index of the next input line the output must account for
    for line in text.split("\n")[1:]:
        if m := _GAP.fullmatch(line):
            count, first, last = _numbers(m)
            assert (first - 1, last - first + 1) == (nxt, count)
            nxt = last
        elif m := _RUN.fullmatch(line):
            count, first, last = _numbers(m)
            assert first == nxt and last - first + 1 == count >= 3  # right after its first line, shown
            assert len({canonical_line(lines[j]) for j in range(first - 1, last)}) == 1
            nxt = last
        elif m := re.fullmatch(r"… ([\d,]+) lines? omitted …", line):
            nxt += int(m.group(1).replace(",", ""))
        else:
            assert line == lines[nxt]
            nxt += 1
    assert nxt == len(lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["[LOG] tick 1", "[LOG] tick 22", "[ERROR] e 1", "[WARN] w 3", "x", "y", "", "$ go"]),
            st.integers(1, 40),
        ),
        max_size=12,
    ),
    st.integers(0, 15),
    st.integers(0, 50),
)
def test_every_line_is_accounted_for_and_the_tail_is_verbatim(
    runs: list[tuple[str, int]], head: int, tail: int
) -> None:
    content = "\n".join(["$ start", *(line for line, times in runs for _ in range(times))])
    all_lines = content.splitlines()  # a last empty line ends the one before it
    result = compress_log(content, head=head, tail=tail, max_errors=3)
    if not result.changed:
        return
    _assert_accounts_for_every_line(result.text, all_lines)
    if tail:
        assert result.text.split("\n")[-tail:] == all_lines[-tail:]


def test_identical_errors_are_never_merged_with_different_ones() -> None:
    errors = [f"[ERROR] 404 /img/{name}.png" for name in ("a1", "b2", "c3", "d4")]
    lines = ["$ run"] + [f"[LOG] {i}" for i in range(100)] + errors + [f"[LOG] {i}" for i in range(100)]
    text = compress_log("\n".join(lines), head=1, tail=1).text
    assert all(error in text.splitlines() for error in errors)


def test_python_traceback_is_kept_whole() -> None:
    tb = [
        "Traceback (most recent call last):",
        '  File "/app/worker.py", line 88, in run',
        "    result = handler(job)",
        "ValueError: bad payload",
    ]
    lines = [f"2024-05-01 10:00:{i % 60:02d} INFO tick {i}" for i in range(400)]
    lines[200:200] = tb
    text = compress_log("\n".join(lines)).text
    assert "\n".join(tb) in text


# --- JSON -------------------------------------------------------------------------------------------------------


def test_json_of_300kb_keeps_shape_and_first_items() -> None:
    content = api_json()
    doc = json.loads(content)
    assert len(content) >= 300_000
    result = compress_json(content)
    header, body = result.text.split("\n", 1)
    assert header.startswith(f"[compressed JSON: {len(content):,} → ")
    records = len(doc["data"])
    assert f"$.data: {records:,} items, keys: id:int, name:str, email:str, active:bool, score:float" in header
    assert re.search(rf"nickname:null \([\d,]+/{records:,}\)", header)  # a key only some records have
    pruned = json.loads(body)  # the body is valid JSON
    assert list(pruned) == list(doc)  # every top-level key
    assert pruned["data"][:5] == doc["data"][:5]
    assert pruned["data"][5] == f"…+{records - 5:,} more items"
    assert pruned["meta"] == doc["meta"] and pruned["links"] == doc["links"] and pruned["errors"] is None
    assert result.chars_after < 2_000
    assert compress_json(result.text).text == result.text


def test_json_strings_keys_and_depth_are_bounded() -> None:
    doc = {"blob": "x" * 5_000, "wide": {f"k{i}": i for i in range(300)}, "deep": [[[[[[[[[[1]]]]]]]]]]}
    body = compress_json(json.dumps(doc), max_string=50, max_keys=10, depth=4).text.split("\n", 1)[1]
    pruned = json.loads(body)
    assert pruned["blob"] == "x" * 50 + "…(+4,950 chars)"
    assert len(pruned["wide"]) == 11 and pruned["wide"]["…"] == "+290 more keys"
    assert "…array of 1 item" in body


def test_json_lines_are_compressed_as_a_log_and_non_json_as_text() -> None:
    records = [json.dumps({"level": "error" if i == 700 else "info", "msg": f"request {i}"}) for i in range(2_000)]
    result = compress_json("\n".join(records))
    assert result.kind == "log" and records[700] in result.text.splitlines()
    assert compress_json("not json at all " * 1_000).kind == "text"


# --- text and dispatch ------------------------------------------------------------------------------------------


def test_text_keeps_head_and_tail_with_a_one_line_note() -> None:
    content = "\n".join(f"line {i}: the quick brown fox jumps over the lazy dog" for i in range(2_000))
    result = compress_text(content, max_chars=4_000)
    assert result.kind == "text" and result.chars_after <= 4_000 + 100
    assert result.text.startswith("line 0: ") and result.text.rstrip().endswith(
        "line 1999: the quick brown fox jumps over the lazy dog"
    )
    notes = [line for line in result.text.splitlines() if "output truncated" in line]
    assert len(notes) == 1 and "of 2000 lines" in notes[0]
    assert compress_text(result.text, max_chars=4_000).text == result.text
    assert not compress_text("short", max_chars=4_000).changed


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda: deep_aria_tree()[0], "snapshot"),
        (lambda: console_log()[0], "log"),
        (api_json, "json"),
        (lambda: "word " * 10_000, "text"),
    ],
)
def test_compress_picks_the_compressor_by_kind_and_is_idempotent(make: Any, kind: str) -> None:
    content = make()
    result = compress(content)
    assert result.kind == kind and result.changed and len(result.text) < len(content)
    again = compress(result.text)
    assert again.text == result.text and not again.changed and again.kind == kind
    assert compress(content) == result  # deterministic


def test_docstring_examples_hold() -> None:
    from summarization_pydantic_ai.compression import _compress, _compress_log, _compress_snapshot

    for module in (_compress, _compress_log, _compress_snapshot):
        assert doctest.testmod(module).failed == 0


def test_chrome_devtools_snapshot_keeps_every_control_by_uid() -> None:
    lines = ['uid=1_0 RootWebArea "Shop"', '  uid=1_1 main ""']
    for i in range(200):
        lines += [
            f'    uid=2_{i}a generic ""',
            f'      uid=2_{i}b heading "Item {i}" level="2"',
            f'      uid=2_{i}c StaticText "costs {i} EUR"',
            f'      uid=2_{i}d button "Buy item {i}"',
        ]
    content = "\n".join(lines)
    text = compress_snapshot(content, depth=2).text
    assert text.startswith("[compressed snapshot (Chrome DevTools), depth 2: ")
    assert all(f'    uid=2_{i}d button "Buy item {i}"' in text for i in range(200))
    assert 'uid=2_7b heading "Item 7"' in text and "StaticText" not in text.split("\n", 1)[1]


def test_a_deep_clickable_element_without_a_role_is_kept() -> None:
    filler = "\n".join(f"      - generic [ref=f{i}]:\n        - text: filler {i}" for i in range(100))
    content = (
        "- main [ref=e1]:\n  - generic [ref=e2]:\n    - generic [ref=e3]:\n"
        "      - generic [ref=e4] [cursor=pointer]: Sign in\n" + filler
    )
    text = compress_snapshot(content, depth=2).text
    assert "    - generic [ref=e4]: Sign in" in text.splitlines()  # lifted, the marker dropped with the rest
    assert "filler" not in text
