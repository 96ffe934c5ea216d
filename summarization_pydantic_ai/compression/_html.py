"""HTML for the snapshot previews: a tolerant, single-pass tag scanner (regular expressions, no DOM) that
builds the element tree: links, buttons, inputs, selects, textareas and elements with an interactive role or a
click handler are interactive; header/nav/main/footer/aside/form/dialog/table and headings give context."""

from __future__ import annotations

import html
import re

from ._common import clip
from ._tree import INTERACTIVE, INTERACTIVE_ROLES, LANDMARK, LANDMARK_ROLES, Node, Tree, is_heading, words

__all__ = ["looks_like_html", "parse_html"]

_HTML_HINT = re.compile(
    r"<(?:div|span|a|p|ul|li|button|input|form|table|tr|td|img|section|nav|header|footer|main|body|head|script|"
    r"link|meta|h[1-6]|label|select|textarea)\b",
    re.IGNORECASE,
)
_TAG_NAME = re.compile(r"<(/?)([a-zA-Z][\w:-]{0,40})(?=[\s/>])")
_MAX_TAG = 8_000
"""A `<` whose `>` is further than this is text, not a tag."""
_HTML_ATTR = re.compile(r"([^\s\"'>/=]+)(?:\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s\"'>]+))?")
_VOID = words("area base br col embed hr img input link meta param source track wbr")
_RAW = frozenset({"script", "style", "template", "noscript", "svg", "textarea", "title"})
_AUTO_CLOSE = frozenset({"li", "p", "option", "tr", "td", "th", "dt", "dd"})
_HTML_LANDMARK = {
    "header": "banner",
    "nav": "navigation",
    "main": "main",
    "footer": "contentinfo",
    "aside": "complementary",
    "form": "form",
    "dialog": "dialog",
    "table": "table",
    "search": "search",
}
_HTML_KEEP = ("id", "name", "type", "href", "role", "aria-label", "placeholder", "title", "value", "action", "for")


def looks_like_html(content: str) -> bool:
    """An HTML document or fragment: a doctype or `<html>` first, or markup first with common HTML tags."""
    start = content[:4_096].lstrip()[:200].lower()
    if start.startswith(("<!doctype html", "<html")) or ("<html" in start and start.startswith("<?xml")):
        return True
    return start.startswith("<") and not start.startswith("<?xml") and len(_HTML_HINT.findall(content, 0, 65_536)) >= 5


def _html_attrs(raw: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for m in _HTML_ATTR.finditer(raw):
        value = m.group(2) or ""
        if value[:1] in ('"', "'"):
            value = value[1:-1]
        attrs.setdefault(m.group(1).lower(), html.unescape(value))
    return attrs


def _html_classify(tag: str, raw: str) -> tuple[int, str, dict[str, str]]:
    """(kind, role used for counting, attributes) of an HTML start tag."""
    cheap = tag in ("a", "button", "input", "select", "textarea", "summary") or tag in _HTML_LANDMARK
    hinted = any(hint in raw for hint in ("role", "onclick", "contenteditable", "aria-label", "tabindex"))
    if not cheap and not hinted and not is_heading(tag):
        return 0, tag, {}
    attrs = _html_attrs(raw)
    role = attrs.get("role", "").lower()
    if role in INTERACTIVE_ROLES:
        return INTERACTIVE, tag, attrs
    if tag == "input":
        return (0 if attrs.get("type", "").lower() == "hidden" else INTERACTIVE), tag, attrs
    if tag == "a":
        interactive = "href" in attrs or "onclick" in attrs
        return (INTERACTIVE if interactive else 0), tag, attrs
    if tag in ("button", "select", "textarea", "summary"):
        return INTERACTIVE, tag, attrs
    if "onclick" in attrs or attrs.get("contenteditable", "false").lower() in ("", "true"):
        return INTERACTIVE, tag, attrs
    if is_heading(tag):
        return LANDMARK, tag, attrs
    if tag in _HTML_LANDMARK:
        return LANDMARK, _HTML_LANDMARK[tag], attrs
    if role in LANDMARK_ROLES:
        return LANDMARK, role, attrs
    if tag in ("section", "article") and ("aria-label" in attrs or "id" in attrs):
        return LANDMARK, "region", attrs
    return 0, tag, attrs


class _HtmlScanner:
    """A tolerant single-pass tag scanner (no DOM): depth from the open tags, raw-text elements (script, style)
    skipped whole, comments skipped, optional end tags (`li`, `p`, `td`...) closed by their next sibling."""

    def __init__(self, content: str) -> None:
        self.content = content
        self.lower: str | None = None
        self.tree = Tree("HTML page")
        self.stack: list[tuple[str, Node | None]] = []
        self.collecting: list[Node] = []
        self.pos = 0

    def run(self) -> Tree:
        content, n = self.content, len(self.content)
        gt = -1  # the next ">" (found once, reused by every "<" before it: linear on any input)
        text_start = 0
        while self.pos < n:
            lt = content.find("<", self.pos)
            if lt < 0:
                break
            if content.startswith("<!--", lt):
                self._text_between(text_start, lt)
                end = content.find("-->", lt + 4)
                self.pos = text_start = n if end < 0 else end + 3
                continue
            if gt < lt:
                gt = content.find(">", lt)
                if gt < 0:
                    break
            m = _TAG_NAME.match(content, lt, gt + 1)
            if m is None or gt - lt > _MAX_TAG:
                self.pos = lt + 1
                continue
            self._text_between(text_start, lt)
            self.pos = text_start = gt + 1
            tag, raw = m.group(2).lower(), content[m.end() : gt]
            if m.group(1):
                self._close(tag)
            else:
                self._open(tag, raw)
                text_start = max(text_start, self.pos)
        for node in self.tree.nodes:
            if node.parts is not None:
                text = " ".join(html.unescape(" ".join(_strip_tags(p) for p in node.parts)).split())
                node.name = text
                node.label += clip(text, 60) + node.close
                if is_heading(node.role):
                    self.tree.headings.append((text, node.role))
        return self.tree

    def _text_between(self, start: int, end: int) -> None:
        if self.collecting and end > start:
            self._text(self.content[start:end])

    def _text(self, text: str) -> None:
        for node in self.collecting:
            if node.parts is not None and sum(len(p) for p in node.parts) < 120:
                node.parts.append(text)

    def _pop_to(self, k: int) -> None:
        for _, node in self.stack[k:]:
            if node is not None and node in self.collecting:
                self.collecting.remove(node)
        del self.stack[k:]

    def _close(self, tag: str) -> None:
        for k in range(len(self.stack) - 1, max(-1, len(self.stack) - 40), -1):
            if self.stack[k][0] == tag:
                self._pop_to(k)
                return

    def _open(self, tag: str, raw: str) -> None:
        if tag in _AUTO_CLOSE and self.stack and self.stack[-1][0] == tag:
            self._pop_to(len(self.stack) - 1)
        depth = len(self.stack)
        kind, role, attrs = _html_classify(tag, raw)
        if self.collecting and tag == "img":
            img = _html_attrs(raw)
            self._text(f" {img.get('alt') or img.get('aria-label') or ''} ")
        if tag in _RAW:
            self._raw(tag, depth, kind, attrs)
            return
        node = self.tree.add(depth, role, "", _html_label(tag, attrs), kind)
        if tag in _VOID or raw.rstrip().endswith("/"):
            return
        if node is not None and tag != "select" and (node.kind == INTERACTIVE or is_heading(tag)):
            node.parts = []
            node.close = f"</{tag}>"
            self.collecting.append(node)
        self.stack.append((tag, node))

    def _raw(self, tag: str, depth: int, kind: int, attrs: dict[str, str]) -> None:
        """An element whose content is not markup: jump to its end tag."""
        lower = self.lower = self.content.lower() if self.lower is None else self.lower
        n = len(self.content)
        end = lower.find(f"</{tag}", self.pos)
        inner = self.content[self.pos : end if end >= 0 else n]
        close = lower.find(">", end) if end >= 0 else -1
        self.pos = n if close < 0 else close + 1
        if tag == "title":
            self.tree.title = self.tree.title or clip(" ".join(html.unescape(inner).split()), 120)
        if tag == "textarea":
            attrs.setdefault("value", clip(" ".join(inner.split()), 40))
        self.tree.add(depth, tag, "", _html_label(tag, attrs), kind)


_TAGS = re.compile(r"<[^>]{0,2000}>")


def _strip_tags(text: str) -> str:
    return _TAGS.sub(" ", text)


def _html_label(tag: str, attrs: dict[str, str]) -> str:
    parts = [tag]
    for key in _HTML_KEEP:
        if key in attrs:
            value = attrs[key]
            parts.append(f'{key}="{clip(value, 60)}"' if value else key)
    parts.extend(flag for flag in ("checked", "disabled", "selected", "required") if flag in attrs)
    return "<" + " ".join(parts) + ">"


def parse_html(content: str) -> Tree:
    """The element tree of an HTML page."""
    return _HtmlScanner(content).run()
