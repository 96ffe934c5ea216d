"""Accessibility / DOM snapshot previews for browser agents.

Four inputs are understood: Playwright aria snapshots (`- button "Submit" [ref=e12]`, the `browser_snapshot`
output of Playwright MCP, page URL and title included), Chrome DevTools MCP snapshots
(`uid=1_3 button "Submit"`), accessibility trees as JSON (`{"role": ..., "name": ..., "children": [...]}`) and
HTML. The preview counts the page's elements, lists its interactive elements (buttons, links, inputs...) with
their names and refs nested under the landmarks that hold them (banner, navigation, main, form, dialog...) and
headings, up to `depth` outline levels; what lies deeper is counted on the line of its ancestor at the last
level. Elements that repeat (`button "Add to cart"` x 300) are shown three times, then counted with their ref range.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal, cast

from ._common import clip
from ._html import looks_like_html, parse_html
from ._tree import INTERACTIVE_ROLES, LANDMARK_ROLES, Node, Tree, quoted, role_kind, tree_preview, words

__all__ = ["INTERACTIVE_ROLES", "LANDMARK_ROLES", "SnapshotFlavor", "detect_snapshot", "is_ax_tree", "snapshot_preview"]

SnapshotFlavor = Literal["aria", "uid", "html", "axtree"]

_ARIA_ROLES = (
    INTERACTIVE_ROLES
    | LANDMARK_ROLES
    | words(
        "alert application article blockquote caption cell code columnheader definition deletion directory "
        "document emphasis feed figure generic grid gridcell group img image insertion list listitem log mark "
        "marquee math meter none note option paragraph presentation progressbar radiogroup row rowgroup rowheader "
        "scrollbar separator status strong subscript superscript term text time timer tooltip iframe "
        "rootwebarea webarea statictext"
    )
)
_ARIA = re.compile(
    r"(?P<indent> *)- '?(?P<role>[A-Za-z][\w-]*)"
    r"(?: (?P<name>\"(?:[^\"\\]|\\.)*\"|/(?:[^/\\]|\\.)+/))?"
    r"(?P<attrs>(?: \[[^\]]*\])*)'?"
    r"(?::(?: (?P<text>.*))?)?\s*$"
)
_ARIA_PROP = re.compile(r"(?P<indent> *)- /(?P<prop>[\w-]+):(?: (?P<value>.*))?$")
_ATTR_BRACKET = re.compile(r"\[([^\]]*)\]")
_PAGE_FACT = re.compile(r"\s*-? ?Page (URL|Title): (.*)$")
_UID = re.compile(
    r"(?P<indent> *)uid=(?P<uid>\S+) (?P<role>[A-Za-z][\w-]*)(?: (?P<name>\"(?:[^\"\\]|\\.)*\"))?(?P<rest>.*)$"
)
_MARKUP = re.compile(r"<[a-zA-Z][\w:-]*[\s/>]")
_VALUE_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton", "slider"})


def _unquote(name: str | None) -> str:
    if not name:
        return ""
    if name.startswith('"'):
        try:
            value = json.loads(name)
        except ValueError:
            return name[1:-1]
        return value if isinstance(value, str) else name
    return name


def is_ax_tree(value: Any) -> bool:
    """Whether a parsed JSON value is an accessibility tree (`role` plus `children` or `name` at the root)."""
    if not isinstance(value, dict):
        return False
    root = cast(dict[str, Any], value)
    return isinstance(root.get("role"), str) and (isinstance(root.get("children"), list) or "name" in root)


def detect_snapshot(head: Sequence[str], content: str, *, lenient: bool = False) -> SnapshotFlavor | None:
    """Which snapshot format the first lines (`head`) / the content are in, if any. Aria lines must be at least
    half of the lines (a fifth with five refs); `lenient` (the caller was told it is a snapshot) takes any aria
    line with a ref, any three aria or uid lines, or any markup."""
    lines = [line for line in head if line.strip()]
    if lines:
        aria = refs = uid = 0
        for line in lines:
            m = _ARIA.match(line)
            if (m and m.group("role").lower() in _ARIA_ROLES) or _ARIA_PROP.match(line):
                aria += 1
                refs += "[ref=" in line
            if _UID.match(line):
                uid += 1
        share = aria / len(lines)
        if aria >= 3 and (share >= 0.5 or (refs >= 5 and share >= 0.2)):
            return "aria"
        if uid >= 3 and uid / len(lines) >= 0.5:
            return "uid"
        if lenient and (refs or aria >= 3 or uid >= 3):
            return "aria" if refs or aria >= uid else "uid"
    if looks_like_html(content):
        return "html"
    return "html" if lenient and _MARKUP.search(content, 0, 65_536) else None


# --- parsers ------------------------------------------------------------------------------------------------


def _parse_aria(content: str) -> Tree:
    tree = Tree("Accessibility snapshot (Playwright aria)")
    last_at: dict[int, Node | None] = {}
    for raw_line in content.split("\n"):
        line = raw_line.rstrip("\r")
        m = _ARIA.match(line)
        if m is None:
            prop = _ARIA_PROP.match(line)
            if prop is not None:
                parent = last_at.get(len(prop.group("indent")) // 2 - 1)
                if parent is not None and prop.group("prop") == "url" and not parent.url:
                    parent.url = clip((prop.group("value") or "").strip(), 80)
                continue
            fact = _PAGE_FACT.match(line)
            if fact is not None:
                if fact.group(1) == "URL":
                    tree.url = tree.url or fact.group(2).strip()
                else:
                    tree.title = tree.title or fact.group(2).strip()
            continue
        depth = len(m.group("indent")) // 2
        role = m.group("role")
        name = _unquote(m.group("name"))
        attrs = [a for a in _ATTR_BRACKET.findall(m.group("attrs") or "") if not a.startswith("cursor=")]
        ref = next((a[4:] for a in attrs if a.startswith("ref=")), "")
        label = role + (f" {quoted(name)}" if name else "") + "".join(f" [{clip(a, 30)}]" for a in attrs)
        text = (m.group("text") or "").strip()
        if text and role in _VALUE_ROLES:
            label += f": {clip(text, 40)}"
        kind = role_kind(role)
        node = tree.add(depth, role, name, label, kind, ref=ref)
        last_at[depth] = node
        if role == "heading":
            level = next((a[6:] for a in attrs if a.startswith("level=")), "")
            tree.headings.append((name or text, f"h{level or '?'}"))
    return tree


def _parse_uid(content: str) -> Tree:
    tree = Tree("Accessibility snapshot (Chrome DevTools)")
    for line in content.split("\n"):
        m = _UID.match(line.rstrip("\r"))
        if m is None:
            continue
        role = m.group("role")
        name = _unquote(m.group("name"))
        rest = m.group("rest").strip()
        label = f"{role}{' ' + quoted(name) if name else ''} [uid={m.group('uid')}]"
        if rest:
            label += " " + clip(rest, 50)
        if role.lower() == "rootwebarea" and name:
            tree.title = tree.title or name
        tree.add(len(m.group("indent")) // 2, role, name, label, role_kind(role), ref=m.group("uid"))
        if role.lower() == "heading":
            tree.headings.append((name, "heading"))
    return tree


def _parse_axtree(value: Any) -> Tree:
    tree = Tree("Accessibility tree (JSON)")
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack and tree.total < 200_000:
        item, depth = stack.pop()
        if not isinstance(item, dict):
            continue
        node = cast(dict[str, Any], item)
        role = str(node.get("role", ""))
        name = str(node.get("name", "") or "")
        label = role + (f" {quoted(name)}" if name else "")
        for key in ("value", "checked", "pressed", "expanded", "disabled", "level"):
            if key in node and node[key] not in (None, "", False):
                label += f" [{key}={clip(str(node[key]), 30)}]"
        if role.lower() in ("webarea", "rootwebarea") and name:
            tree.title = tree.title or name
        tree.add(depth, role, name, label, role_kind(role))
        if role == "heading":
            tree.headings.append((name, f"h{node.get('level', '?')}"))
        children = node.get("children")
        if isinstance(children, list):
            stack.extend((child, depth + 1) for child in reversed(cast(list[Any], children)))
    return tree


def snapshot_preview(content: str, flavor: SnapshotFlavor, max_chars: int, depth: int = 4, ax_value: Any = None) -> str:
    """The preview of a snapshot (see module docstring); `ax_value` is the parsed JSON for `axtree`."""
    if flavor == "aria":
        tree = _parse_aria(content)
    elif flavor == "uid":
        tree = _parse_uid(content)
    elif flavor == "axtree":
        tree = _parse_axtree(ax_value)
    else:
        tree = parse_html(content)
    html_like = flavor == "html"
    noun = "element" if html_like else "node"
    return tree_preview(tree, len(content), max_chars, depth, bullet="" if html_like else "- ", noun=noun)
