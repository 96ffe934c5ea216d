"""The coding session before the cost policy (issue 21's "today"), which `coding_session.py` compares with.

The table docs/benchmarks.md carried up to 37855a4, measured on 6c85033: context management as on c218657 (the
issue's reference; the session and the simulator came just after it), the todo list in the instructions (every
update re-wrote the whole cached prompt: the head rewrites). Its dollars were measured again on b97ecde (the same
code) with this script's pricing: same session, simulator and prices.
"""

from __future__ import annotations

__all__ = ["BEFORE_COMMIT", "BEFORE_ROWS", "BEFORE_USD", "BeforeRow"]

BEFORE_COMMIT = "6c85033"

BEFORE_ROWS: list[tuple[str, ...]] = [
    (
        "none (no context management)",
        "167 (0)",
        "34.36M",
        "100%",
        "462,818",
        "100%",
        "100%",
        "100%",
        "77%",
        "20 (20)",
        "yes",
        "yes yes yes",
    ),
    (
        "compression only (`medium`)",
        "167 (0)",
        "14.11M",
        "41%",
        "216,970",
        "25%",
        "26%",
        "42%",
        "75%",
        "32 (20)",
        "yes",
        "yes yes yes",
    ),
    (
        "default stack (eviction + middleware)",
        "167 (18)",
        "3.55M",
        "10%",
        "39,762",
        "10%",
        "11%",
        "13%",
        "64%",
        "29 (18)",
        "yes",
        "yes yes yes",
    ),
    ("`sliding_window`", "167 (0)", "2.51M", "7%", "32,787", "6%", "6%", "8%", "67%", "39 (20)", "yes", "yes yes yes"),
    ("`checkpoint`", "167 (0)", "2.05M", "6%", "32,982", "5%", "5%", "7%", "66%", "38 (20)", "yes", "yes yes **no**"),
    ("`hybrid`", "167 (0)", "1.97M", "6%", "32,982", "5%", "5%", "6%", "68%", "37 (20)", "yes", "yes yes **no**"),
    ("`summarize`", "167 (15)", "3.07M", "9%", "39,507", "9%", "10%", "11%", "63%", "37 (19)", "yes", "yes yes yes"),
    (
        "none, todo list not in the instructions",
        "167 (0)",
        "34.35M",
        "100%",
        "458,109",
        "31%",
        "31%",
        "82%",
        "99%",
        "0 (0)",
        "yes",
        "yes yes yes",
    ),
    (
        "default stack, todo list not in the instructions",
        "167 (17)",
        "3.52M",
        "10%",
        "39,646",
        "7%",
        "7%",
        "11%",
        "81%",
        "10 (0)",
        "yes",
        "yes yes yes",
    ),
]
"""The rows as published (the columns of `coding_session.render`)."""

BeforeRow = tuple[float, float, float, int, int, int]
"""Anthropic (message prefix), Anthropic automatic and OpenAI cost in dollars; prefix rewrites, head rewrites and
requests (summaries included) with the Anthropic message-prefix model."""

BEFORE_USD: dict[str, BeforeRow] = {
    "none (no context management)": (63.8656, 64.0443, 52.8475, 34, 34, 167),
    "compression only (`medium`)": (16.2723, 16.4024, 22.0423, 54, 34, 167),
    "default stack (eviction + middleware)": (6.5854, 6.7886, 6.7937, 54, 34, 185),
    "`sliding_window`": (3.7450, 3.9991, 4.2690, 65, 34, 167),
    "`checkpoint`": (3.1342, 3.3519, 3.5321, 63, 34, 167),
    "`hybrid`": (2.9080, 3.1500, 3.3566, 62, 34, 167),
    "`summarize`": (5.7730, 6.1073, 5.8932, 68, 34, 182),
    "none, todo list not in the instructions": (20.0241, 20.0241, 43.5790, 0, 0, 167),
    "default stack, todo list not in the instructions": (4.4504, 4.5262, 5.9651, 19, 0, 184),
}
