"""The element tree the snapshot previews share, and its outline: interactive elements nested under the
landmarks and headings that hold them, to a number of outline levels (deeper elements are counted on their
ancestor's line), with elements that repeat (same role and name, digits aside) shown three times and counted."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ._common import Section, assemble, clip, fmt_int, plural

__all__ = [
    "INTERACTIVE",
    "INTERACTIVE_ROLES",
    "LANDMARK",
    "LANDMARK_ROLES",
    "Node",
    "Tree",
    "is_heading",
    "quoted",
    "role_kind",
    "tree_preview",
    "words",
]

INTERACTIVE, LANDMARK = 1, 2
"""`Node.kind`: listed in the outline / shown as context (0: only counted)."""


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


INTERACTIVE_ROLES = words(
    "button link textbox searchbox checkbox radio combobox listbox menuitem menuitemcheckbox menuitemradio tab "
    "switch slider spinbutton treeitem"
)
"""Roles listed in a snapshot preview (options are counted, not listed: a country picker has hundreds)."""
LANDMARK_ROLES = words(
    "banner navigation main contentinfo complementary region form search dialog alertdialog menu menubar tablist "
    "toolbar table grid tree treegrid tabpanel heading"
)
"""Roles shown in the outline as context for the interactive elements they hold."""


@dataclass(slots=True)
class Node:
    """One element: `depth` in the source tree, `role` (or HTML tag), accessible `name`, display `label`."""

    depth: int
    role: str
    name: str
    label: str
    kind: int
    ref: str = ""
    url: str = ""
    parts: list[str] | None = None  # HTML: text collected until the closing tag
    close: str = ""  # HTML: the closing tag appended after the text


@dataclass(slots=True)
class Tree:
    """Every element in document order with its source depth, plus the counts the preview reports."""

    flavor: str
    nodes: list[Node] = field(default_factory=list[Node])
    total: int = 0
    max_depth: int = 0
    interactive: dict[str, int] = field(default_factory=dict[str, int])
    landmarks: dict[str, int] = field(default_factory=dict[str, int])
    headings: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    title: str = ""
    url: str = ""

    def add(self, depth: int, role: str, name: str, label: str, kind: int, *, ref: str = "") -> Node | None:
        """Count an element; keep it (and return it) when it belongs in the outline."""
        self.total += 1
        self.max_depth = max(self.max_depth, depth)
        if kind == INTERACTIVE:
            self.interactive[role] = self.interactive.get(role, 0) + 1
        elif kind == LANDMARK and role != "heading" and not is_heading(role):
            self.landmarks[role] = self.landmarks.get(role, 0) + 1
        node = Node(depth, role, name, label, kind, ref)
        self.nodes.append(node)  # kept even when not shown: it closes the shown nodes it follows
        return node if kind else None


def role_kind(role: str) -> int:
    """`INTERACTIVE`, `LANDMARK` or 0 for an ARIA role."""
    role = role.lower()
    if role in INTERACTIVE_ROLES:
        return INTERACTIVE
    if role in LANDMARK_ROLES:
        return LANDMARK
    return 0


def quoted(name: str, limit: int = 60) -> str:
    """`name` clipped and JSON-quoted."""
    return json.dumps(clip(name, limit), ensure_ascii=False)


def is_heading(tag: str) -> bool:
    """`h1`...`h6`."""
    return len(tag) == 2 and tag[0] == "h" and tag[1] in "123456"


_DIGITS = re.compile(r"\d+")
_SHOWN_REPEATS = 3


@dataclass(slots=True)
class _Row:
    depth: int
    node: Node
    deeper: dict[str, int] = field(default_factory=dict[str, int])


@dataclass(slots=True)
class _Repeat:
    """Elements with the same role and name (digits aside) beyond the first few shown."""

    first: Node
    count: int = 0
    last: Node | None = None


def outline(tree: Tree, max_depth: int, bullet: str) -> tuple[list[str], list[str]]:
    """(outline lines, lines about the repeated elements left out of it)."""
    rows: list[_Row] = []
    repeats: dict[tuple[str, str], _Repeat] = {}
    stack: list[tuple[int, int]] = []  # (source depth, row index) of the shown ancestors
    for node in tree.nodes:
        while stack and stack[-1][0] >= node.depth:
            stack.pop()
        if not node.kind:
            continue
        depth = len(stack)
        if depth >= max_depth:  # too deep to list: counted on the last shown ancestor (interactive ones only)
            if node.kind == INTERACTIVE:
                holder = rows[stack[-1][1]]
                holder.deeper[node.role] = holder.deeper.get(node.role, 0) + 1
            continue
        if node.kind == INTERACTIVE or is_heading(node.role) or node.role == "heading":
            key = (node.role, _DIGITS.sub("#", node.name))
            seen = repeats.get(key)
            if seen is None:
                seen = repeats[key] = _Repeat(node)
            seen.count += 1
            seen.last = node
            if seen.count > _SHOWN_REPEATS:
                continue
        rows.append(_Row(depth, node))
        stack.append((node.depth, len(rows) - 1))
    out: list[str] = []
    for row in rows:
        node = row.node
        line = "  " * row.depth + bullet + node.label + (f" → {node.url}" if node.url else "")
        if row.deeper:
            total = sum(row.deeper.values())
            top = sorted(row.deeper.items(), key=lambda kv: -kv[1])[:4]
            line += f"  (+{fmt_int(total)} deeper: " + ", ".join(f"{fmt_int(c)} {r}" for r, c in top) + ")"
        out.append(line)
    repeated: list[str] = []
    for rep in sorted(repeats.values(), key=lambda r: -r.count):
        if rep.count <= _SHOWN_REPEATS or rep.last is None:
            continue
        first, last = rep.first, rep.last
        name = quoted(first.name, 40) if first.name else ""
        if last.name != first.name:
            name += f"…{quoted(last.name, 40)}"
        refs = f" [ref={first.ref}…{last.ref}]" if first.ref and last.ref else ""
        repeated.append(f"  {first.role} {name} ×{fmt_int(rep.count)}{refs}".replace("  ", " ", 1).rstrip())
    return out, ["  " + line.lstrip() for line in repeated]


def headings_fact(headings: Sequence[tuple[str, str]]) -> str:
    groups: dict[tuple[str, str], list[str]] = {}
    for text, level in headings:
        groups.setdefault((_DIGITS.sub("#", text), level), []).append(text)
    parts: list[str] = []
    for (_, level), texts in list(groups.items())[:10]:
        part = f"{quoted(texts[0], 50)} ({level})"
        if len(texts) > 1:
            part += f" ×{fmt_int(len(texts))}"
        parts.append(part)
    more = f", … +{fmt_int(len(groups) - 10)}" if len(groups) > 10 else ""
    return f"headings ({fmt_int(len(headings))}): " + ", ".join(parts) + more


def counts_fact(counts: dict[str, int]) -> str:
    return ", ".join(f"{fmt_int(c)} {r}" for r, c in sorted(counts.items(), key=lambda kv: -kv[1]))


def tree_preview(tree: Tree, length: int, max_chars: int, depth: int, *, bullet: str, noun: str) -> str:
    """The preview of a parsed tree: header, page facts, counts, headings, outline and repeated elements."""
    depth = max(1, depth)
    interactive = sum(tree.interactive.values())
    header = (
        f"{tree.flavor}, {plural(tree.total, noun)}, {fmt_int(interactive)} interactive, "
        f"depth {fmt_int(tree.max_depth + 1 if tree.total else 0)}, {plural(length, 'char')}"
    )
    facts: list[str] = []
    if tree.title or tree.url:
        facts.append("page: " + " — ".join(x for x in (clip(tree.title, 100), clip(tree.url, 120)) if x))
    if tree.interactive:
        facts.append("interactive: " + counts_fact(tree.interactive))
    if tree.landmarks:
        facts.append("landmarks: " + counts_fact(tree.landmarks))
    if tree.headings:
        facts.append(headings_fact(tree.headings))
    lines, repeated = outline(tree, depth, bullet)
    title = f"outline (interactive elements under their landmarks, {plural(depth, 'level')} deep):"
    sections = [Section(lines, "head", title)]
    if repeated:
        note = f"repeated elements (the first {_SHOWN_REPEATS} are in the outline):"
        sections.append(Section(repeated, "head", note, floor=max_chars // 6))
    return assemble(header, facts, sections, max_chars)
