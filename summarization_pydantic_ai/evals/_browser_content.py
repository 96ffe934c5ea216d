"""What the synthetic browser session's tools return: Playwright-style page snapshots, console logs with repeats
and errors, and web search results as JSON. Deterministic for a given turn."""

from __future__ import annotations

import json

__all__ = ["console_log", "page_snapshot", "search_results"]

_NAV = ("Deals", "Electronics", "Books", "Garden", "Toys", "Fashion", "Sports", "Grocery")
_WORDS = (
    "durable",
    "lightweight",
    "compact",
    "premium",
    "wireless",
    "ergonomic",
    "rechargeable",
    "waterproof",
    "adjustable",
    "foldable",
    "stainless",
    "portable",
    "classic",
    "modern",
    "quiet",
    "efficient",
)


def _line(indent: int, text: str) -> str:
    return "  " * indent + "- " + text


def _product(lines: list[str], ref: list[int], depth: int, page: str, turn: int, i: int) -> None:
    def next_ref() -> str:
        ref[0] += 1
        return f"e{ref[0]}"

    words = " ".join(_WORDS[(i + k) % len(_WORDS)] for k in range(12))
    lines += [
        _line(depth, f"listitem [ref={next_ref()}]:"),
        _line(depth + 1, f"article [ref={next_ref()}]:"),
        _line(depth + 2, f'heading "{page.title()} item {i} (turn {turn})" [level=3] [ref={next_ref()}]'),
        _line(depth + 2, f"generic [ref={next_ref()}]:"),
        _line(depth + 3, f'img "Photo of item {i}" [ref={next_ref()}]'),
        _line(depth + 3, f"paragraph [ref={next_ref()}]: A {words} item for everyday use."),
        _line(depth + 3, f'generic [ref={next_ref()}]: "${10 + i}.{turn % 100:02d}"'),
        _line(depth + 2, f'link "Details of item {i}" [ref={next_ref()}] [cursor=pointer]:'),
        _line(depth + 3, f"/url: /{page}/item-{i}"),
        _line(depth + 2, f'button "Add item {i} to cart" [ref={next_ref()}] [cursor=pointer]'),
    ]


def page_snapshot(page: str, turn: int, products: int = 40) -> str:
    """A Playwright MCP `browser_snapshot` result: page URL and title, then a YAML aria snapshot with a banner,
    navigation, a search form, `products` product cards (nested about 7 levels deep) and a footer."""
    ref = [0]

    def next_ref() -> str:
        ref[0] += 1
        return f"e{ref[0]}"

    lines = [
        "### Page state",
        f"- Page URL: https://shop.example.com/{page}",
        f"- Page Title: {page.title()} | Example Shop",
        "- Page Snapshot:",
        "```yaml",
        _line(0, f"banner [ref={next_ref()}]:"),
        _line(1, f'link "Example Shop home" [ref={next_ref()}] [cursor=pointer]:'),
        _line(2, "/url: /"),
        _line(1, f'navigation "Main" [ref={next_ref()}]:'),
        _line(2, f"list [ref={next_ref()}]:"),
    ]
    for name in _NAV:
        lines += [_line(3, f"listitem [ref={next_ref()}]:"), _line(4, f'link "{name}" [ref={next_ref()}]')]
    lines += [
        _line(1, f'search "Site" [ref={next_ref()}]:'),
        _line(2, f'searchbox "Search products" [ref={next_ref()}]'),
        _line(2, f'button "Search" [ref={next_ref()}]'),
        _line(0, f"main [ref={next_ref()}]:"),
        _line(1, f'heading "{page.title()}" [level=1] [ref={next_ref()}]'),
        _line(1, f"list [ref={next_ref()}]:"),
    ]
    for i in range(products):
        _product(lines, ref, 2, page, turn, i)
    lines += [
        _line(0, f"contentinfo [ref={next_ref()}]:"),
        _line(1, f"paragraph [ref={next_ref()}]: Copyright 2025 Example Shop. All prices include VAT."),
        "```",
    ]
    return "\n".join(lines)


def console_log(turn: int, *, error: bool) -> str:
    """A `browser_console_messages` result: about 240 lines, mostly repeated analytics and render logs, a few
    warnings, and (when `error`) one uncaught error with its stack."""
    lines: list[str] = []
    for i in range(60):
        lines += [
            "[LOG] analytics: ping sent (batch=1) @ https://shop.example.com/static/analytics.js:12",
            f"[DEBUG] render: ProductCard mounted in {3 + i % 4} ms @ https://shop.example.com/static/app.js:88",
            "[LOG] websocket: heartbeat ok @ https://shop.example.com/static/live.js:40",
        ]
        if i % 20 == 5:
            lines.append("[WARNING] Deprecated API: document.domain setter used @ https://ads.example.net/tag.js:3")
    if error:
        lines += [
            f"[ERROR] Uncaught TypeError: Cannot read properties of undefined (reading 'price') (turn {turn})",
            f"    at updateCartTotal (https://shop.example.com/static/cart.js:{100 + turn}:17)",
            "    at HTMLButtonElement.onClick (https://shop.example.com/static/cart.js:42:5)",
        ]
    lines.append(f"[LOG] page idle after turn {turn}")
    return "\n".join(lines)


def search_results(query: str, turn: int, count: int = 10) -> str:
    """A `web_search` result: the query and `count` results (title, URL, snippet), as JSON."""
    results = [
        {
            "rank": i + 1,
            "title": f"{query.title()} - review {i + 1} of {count}",
            "url": f"https://reviews.example.org/{query.replace(' ', '-')}/{turn}-{i}",
            "snippet": " ".join(_WORDS[(turn + i + k) % len(_WORDS)] for k in range(30)),
            "published": f"2025-0{1 + i % 9}-1{i % 10}",
        }
        for i in range(count)
    ]
    return json.dumps({"query": query, "turn": turn, "results": results}, indent=2)
