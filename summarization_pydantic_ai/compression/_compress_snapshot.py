"""Accessibility-tree / DOM snapshot compression for the working context: the outline to `depth` levels, and
below it only what the model acts on and what names it — every interactive element (links, buttons, inputs...,
with their refs and link targets) and every heading, lifted to the last kept level. What is dropped is counted
by role in the first line.

Playwright aria snapshots and Chrome DevTools snapshots are compressed line by line, without building a tree
(a 1 MB snapshot takes a few tens of milliseconds); JSON accessibility trees and HTML pages are parsed with the
snapshot previews' parsers and written out as an aria-like outline.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from ._common import fmt_int, head_lines, plural
from ._html import parse_html
from ._json import parse_json
from ._result import MARK, CompressionResult, finish, is_compressed, unchanged
from ._snapshot import SnapshotFlavor, detect_snapshot, is_ax_tree
from ._tree import INTERACTIVE, INTERACTIVE_ROLES, Node, is_heading, quoted

__all__ = ["DEFAULT_SNAPSHOT_DEPTH", "compress_snapshot"]

DEFAULT_SNAPSHOT_DEPTH = 6
"""Outline levels kept whole when no depth is given (the `medium` level's)."""

_MAX_LINE = 400
"""A kept line longer than this (a text node holding a whole article) keeps both ends."""
_NOISE = " [cursor=pointer]"
"""Playwright's marker on clickable elements: a deep element that has it is kept (a clickable div), then the
marker is dropped everywhere (every kept element keeps its ref, which is what a click needs)."""
_FLAVOR_LABEL: dict[SnapshotFlavor, str] = {
    "aria": "Playwright aria",
    "uid": "Chrome DevTools",
    "axtree": "JSON accessibility tree",
    "html": "HTML page",
}


class _Tally:
    """What the compression kept and dropped."""

    __slots__ = ("clipped", "dropped", "interactive", "lines_in", "lines_out")

    def __init__(self) -> None:
        self.clipped = 0
        self.dropped: dict[str, int] = {}
        self.interactive = 0
        self.lines_in = 0
        self.lines_out = 0

    def drop(self, role: str) -> None:
        self.dropped[role] = self.dropped.get(role, 0) + 1


def _clip_line(line: str) -> str:
    if len(line) <= _MAX_LINE:
        return line
    cut = len(line) - _MAX_LINE
    return line[: _MAX_LINE // 2] + f" … ({fmt_int(cut)} chars) … " + line[-_MAX_LINE // 2 :]


def _is_heading_role(role: str) -> bool:
    return role == "heading" or is_heading(role)


_ROLES = "|".join(sorted(INTERACTIVE_ROLES, key=len, reverse=True))
_ITEM: dict[str, str] = {"aria": r"- '?", "uid": r"uid=\S+ "}
"""What starts an element's line, after its indentation."""
_KEEP_ROLES = rf"(?i:{_ROLES}|heading)\b"
_MARK = "\ue000"
"""Put after the indentation of a kept deep line (a private-use character), so the pass that drops deep lines
can tell them apart; removed at the end."""
# Every pattern starts with a literal newline (the text gets one in front): the regex engine then jumps from
# newline to newline instead of trying each position, which makes a pass over 1 MB several times faster.
_INTERACTIVE_LINE: dict[str, re.Pattern[str]] = {
    flavor: re.compile(rf"\n *{item}(?i:{_ROLES})\b") for flavor, item in _ITEM.items()
}
_LONG_LINE = re.compile(rf"\n[^\n]{{{_MAX_LINE + 1},}}")
_IMAGE_LINE = re.compile(r"\n *- img\b(?![^\n]*\[cursor=pointer\])[^\n]*(?<!:)(?=\n|\Z)")
"""A Playwright image that is not clickable: its alt text describes the page, nothing acts on it."""
_PROSE: dict[int, re.Pattern[str]] = {}


def _prose_pattern(chars: int) -> re.Pattern[str]:
    """A non-interactive aria line whose text (after `role [attributes]: `) is longer than `chars`."""
    found = _PROSE.get(chars)
    if found is None:
        found = _PROSE[chars] = re.compile(rf"(\n *- (?!(?i:{_ROLES}|heading)\b)[^\n:\"]*: )([^\n]{{{chars + 1},}})")
    return found


class _DeepPatterns:
    """The regular expressions that cut one flavor at one depth (compiled once per pair and cached)."""

    __slots__ = ("drop", "keep", "keep_url", "role")

    def __init__(self, flavor: str, depth: int) -> None:
        deep, item = f"\\n {{{2 * depth},}}+", _ITEM[flavor]
        self.keep_url = re.compile(rf"{deep}({item}link\b[^\n]*)\n *+(- /url:)")
        self.keep = re.compile(rf"{deep}(?={item}(?:{_KEEP_ROLES}|[^\n]*\[cursor=pointer\]))")
        self.role = re.compile(rf"{deep}(?!{_MARK}){item}([A-Za-z/][\w-]*)")
        self.drop = re.compile(rf"{deep}(?!{_MARK})[^\n]*")


_PATTERNS: dict[tuple[str, int], _DeepPatterns] = {}


def _patterns(flavor: str, depth: int) -> _DeepPatterns:
    found = _PATTERNS.get((flavor, depth))
    if found is None:
        if len(_PATTERNS) > 64:
            _PATTERNS.clear()
        found = _PATTERNS[(flavor, depth)] = _DeepPatterns(flavor, depth)
    return found


def _compress_lines(content: str, flavor: SnapshotFlavor, depth: int, tally: _Tally, prose: _Prose) -> str:
    """Aria and uid snapshots: lines shallower than `depth` are kept; deeper ones only when they are interactive,
    clickable (`[cursor=pointer]`) or headings, re-indented to `depth`, with the `/url` line of a kept link.
    Whole-text regular expressions, no per-line Python: a 1 MB snapshot is 20,000 lines."""
    tally.lines_in = content.count("\n") + 1
    lift = "  " * depth
    p = _patterns(flavor, depth)
    text = "\n" + (content.replace(_MARK, "") if _MARK in content else content)
    if flavor == "aria":
        text = _cut_prose(text, prose, tally)
    text = p.keep_url.sub(rf"\n{lift}{_MARK}\1\n{lift}  {_MARK}\2", text)
    text = p.keep.sub("\n" + lift + _MARK, text)  # deep clickable elements are kept: `[cursor=pointer]` said so
    text = text.replace(_NOISE, "")  # then it is noise: every kept element has its ref
    roles = p.role.findall(text)
    text, dropped = p.drop.subn("", text)
    for role, count in Counter(roles).items():
        tally.dropped[role.lstrip("/")] = tally.dropped.get(role.lstrip("/"), 0) + count
    if dropped > len(roles):
        tally.dropped["text"] = tally.dropped.get("text", 0) + dropped - len(roles)
    text = _LONG_LINE.sub(lambda m: "\n" + _clip_line(m.group(0)[1:]), text.replace(_MARK, ""))
    tally.interactive = len(_INTERACTIVE_LINE[flavor].findall(text))
    tally.lines_out = text.count("\n")
    return text[1:]


@dataclass(frozen=True, slots=True)
class _Prose:
    """What an aria snapshot keeps of what describes rather than acts: `text_chars` of a long text (`None`: all
    of it, up to the 400-character line clip), and non-clickable images (`images`)."""

    text_chars: int | None = None
    images: bool = True


def _cut_prose(text: str, prose: _Prose, tally: _Tally) -> str:
    if not prose.images:
        text, images = _IMAGE_LINE.subn("", text)
        if images:
            tally.dropped["img"] = tally.dropped.get("img", 0) + images
    if prose.text_chars is not None:
        keep = prose.text_chars
        text, clipped = _prose_pattern(keep).subn(lambda m: m.group(1) + m.group(2)[:keep] + "…", text)
        tally.clipped += clipped
    return text


def _ax_label(node: dict[str, Any]) -> tuple[str, str]:
    role = str(node.get("role", ""))
    name = str(node.get("name", "") or "")
    label = role + (f" {quoted(name, 200)}" if name else "")
    for key in ("ref", "nodeId", "backendDOMNodeId", "value", "checked", "pressed", "expanded", "disabled", "level"):
        if key in node and node[key] not in (None, "", False):
            label += f" [{key}={node[key]}]"
    return role, label


def _compress_axtree(value: Any, depth: int, tally: _Tally) -> str:
    """A JSON accessibility tree as an aria-like outline, cut like the line formats."""
    out: list[str] = []
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if not isinstance(item, dict):
            continue
        node = cast(dict[str, Any], item)
        tally.lines_in += 1
        role, label = _ax_label(node)
        interactive = role.lower() in INTERACTIVE_ROLES
        tally.interactive += interactive
        if level < depth:
            out.append(_clip_line("  " * level + "- " + label))
        elif interactive or _is_heading_role(role.lower()):
            out.append(_clip_line("  " * depth + "- " + label))
        else:
            tally.drop(role or "node")
        children = node.get("children")
        if isinstance(children, list):
            stack.extend((child, level + 1) for child in reversed(cast(list[Any], children)))
    tally.lines_out = len(out)
    return "\n".join(out)


def _compress_html(content: str, depth: int, tally: _Tally) -> str:
    """An HTML page as the outline of its landmarks, headings and controls (other elements are counted)."""
    tree = parse_html(content)
    nodes: Iterable[Node] = tree.nodes
    out: list[str] = []
    if tree.title or tree.url:
        out.append("- page: " + " — ".join(x for x in (tree.title, tree.url) if x))
    for node in nodes:
        tally.lines_in += 1
        tally.interactive += node.kind == INTERACTIVE
        if node.kind == INTERACTIVE or (node.kind and node.depth < depth):
            out.append(_clip_line("  " * min(node.depth, depth) + node.label))
        else:
            tally.drop(node.role)
    tally.lines_out = len(out)
    return "\n".join(out)


def _flavor(content: str) -> tuple[SnapshotFlavor, Any] | None:
    doc = parse_json(content)
    if doc is not None:
        return ("axtree", doc.value) if doc.records is None and is_ax_tree(doc.value) else None
    head = head_lines(content, 300)
    flavor = detect_snapshot(head, content) or detect_snapshot(head, content, lenient=True)
    return (flavor, None) if flavor is not None else None


def _header(flavor: SnapshotFlavor, depth: int, tally: _Tally, chars: tuple[int, int]) -> str:
    dropped = sum(tally.dropped.values())
    top = sorted(tally.dropped.items(), key=lambda kv: (-kv[1], kv[0]))[:6]
    roles = ", ".join(f"{fmt_int(n)} {role}" for role, n in top) + (", …" if len(tally.dropped) > 6 else "")
    clipped = f", {plural(tally.clipped, 'long text')} clipped" if tally.clipped else ""
    return (
        f"{MARK}snapshot ({_FLAVOR_LABEL[flavor]}), depth {depth}: "
        f"{fmt_int(tally.lines_in)} → {fmt_int(tally.lines_out)} lines, {fmt_int(chars[0])} → {fmt_int(chars[1])} "
        "chars; every interactive element kept "
        f"({fmt_int(tally.interactive)}), {plural(dropped, 'deeper element')} dropped ({roles}){clipped}]"
    )


def compress_snapshot(
    content: str, *, depth: int = DEFAULT_SNAPSHOT_DEPTH, text_chars: int | None = None, images: bool = True
) -> CompressionResult:
    """Compress a page snapshot (Playwright aria, Chrome DevTools, JSON accessibility tree or HTML) to `depth`
    outline levels, keeping every interactive element (links, buttons, inputs... with their refs) and every
    heading from deeper levels, lifted to the last kept level. The first line says what was dropped.

    In a Playwright snapshot, `text_chars` clips the text of a non-interactive element (a product description,
    an article paragraph) to its first `text_chars` characters, and `images=False` drops the images nothing can
    click (their alt text): what describes the page shrinks, what the model acts on and what names and prices it
    (headings, short texts) stays.

    Deterministic and idempotent: compressed output is returned as it is. Content that is not a snapshot, or
    that has nothing below `depth`, comes back unchanged (`result.changed` is false).

        >>> items = [
        ...     f'    - listitem [ref=e{i}0]:\\n      - img "Shoe {i}" [ref=e{i}1]\\n'
        ...     f'      - paragraph [ref=e{i}2]: A fine shoe\\n      - button "Buy" [ref=e{i}3] [cursor=pointer]'
        ...     for i in range(1, 21)
        ... ]
        >>> snapshot = "- main [ref=e1]:\\n  - list [ref=e2]:\\n" + "\\n".join(items)
        >>> print(compress_snapshot(snapshot, depth=2).text[:281])  # doctest: +NORMALIZE_WHITESPACE
        [compressed snapshot (Playwright aria), depth 2: 82 → 22 lines, 3,010 → 810 chars; every interactive
         element kept (20), 60 deeper elements dropped (20 img, 20 listitem, 20 paragraph)]
        - main [ref=e1]:
          - list [ref=e2]:
            - button "Buy" [ref=e13]
            - button "Buy" [ref=e23]
    """
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    if text_chars is not None and text_chars < 1:
        raise ValueError(f"text_chars must be >= 1 or None, got {text_chars}")
    if is_compressed(content) or not content.strip():
        return unchanged(content, "snapshot")
    found = _flavor(content)
    if found is None:
        return unchanged(content, "snapshot")
    flavor, value = found
    tally = _Tally()
    if flavor == "axtree":
        body = _compress_axtree(value, depth, tally)
    elif flavor == "html":
        body = _compress_html(content, depth, tally)
    else:
        body = _compress_lines(content, flavor, depth, tally, _Prose(text_chars, images))
        if not tally.dropped and not tally.clipped and len(body) >= len(content) - len(_NOISE):
            return unchanged(content, "snapshot")
    return finish(content, "snapshot", body, lambda size: _header(flavor, depth, tally, (len(content), size)))
