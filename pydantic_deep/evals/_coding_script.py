"""The coding session's script: six user requests (runs), each a list of steps, one step per model request.

A step is the tool calls of one response (several: parallel calls) or the run's final text. The steps follow
the shapes of real coding agents: a todo list kept current, whole-suite test runs with long logs, greps with
many matches, files read in parallel, read again after an edit (superseded reads) or paged, edits (one with a
stale `old_string` that fails), new files written test-first, long documents fetched (delivered as user text
beside the tool result), and a few tool errors (a missing file, a wrong test path, two todos in progress).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._coding_project import (
    BUGS,
    CHANGELOG,
    FEATURE,
    Bug,
    feature_module_source,
    feature_test_source,
    module_path,
    module_source,
    test_path,
)

__all__ = ["PHASES", "RUNS", "Call", "Run", "Step"]

Call = tuple[str, dict[str, Any]]
Step = tuple[Call, ...] | str
"""The calls of one response (made in parallel), or the run's final answer."""


@dataclass(frozen=True)
class Run:
    phase: str
    prompt: str
    steps: tuple[Step, ...]


def read(path: str, **page: int) -> Call:
    return ("read_file", {"path": path, **page})


def grep(pattern: str, path: str = "/") -> Call:
    return ("grep", {"pattern": pattern, "path": path})


def tests(path: str = "tests") -> Call:
    return ("run_tests", {"path": path})


def edit(path: str, old: str, new: str) -> Call:
    return ("edit_file", {"path": path, "old_string": old, "new_string": new})


def fetch(url: str) -> Call:
    return ("fetch_url", {"url": url})


def _bug(module: str, function: int) -> Bug:
    return next(b for b in BUGS if (b.module, b.function) == (module, function))


@dataclass
class _Builder:
    """Steps of one run, with its todo list (one item per task, updated as each is done)."""

    items: list[str]
    steps: list[Step] = field(default_factory=list[Step])
    done: int = 0

    def todos(self, *, in_progress: int | None = None) -> Call:
        current = self.done if in_progress is None else in_progress
        states = [
            "completed" if i < self.done else "in_progress" if i == current else "pending"
            for i in range(len(self.items))
        ]
        return (
            "write_todos",
            {"todos": [{"content": c, "status": s} for c, s in zip(self.items, states, strict=True)]},
        )

    def add(self, *calls: Call) -> None:
        self.steps.append(tuple(calls))

    def progress(self) -> None:
        self.done += 1
        self.add(self.todos())

    def fix(self, bug: Bug, variant: int, *, tick: bool = True) -> None:
        """Find and fix one bug (three ways), run its tests, tick its todo (`tick=False`: its item has another
        bug left)."""
        source, tested = module_path(bug.module), test_path(bug.module)
        if variant == 0:  # search for it, read module and tests side by side
            self.add(grep(bug.name))
            self.add(read(source), read(tested))
        elif variant == 1:  # an edit copied with its line number fails; read again, edit again
            line = module_source(bug.module).splitlines().index(bug.buggy_line) + 1
            self.add(read(source))
            self.add(edit(source, f"{line:>6}\t{bug.buggy_line}", f"{line:>6}\t{bug.fixed_line}"))
            self.add(read(source))
        else:  # a page of the module around the function, then its group's tests after the fix
            line = module_source(bug.module).splitlines().index(bug.buggy_line)
            self.add(grep(r"round\(value, 2\)", "/src"))
            self.add(read(source, offset=max(line - 12, 0), limit=30))
        self.add(edit(source, bug.buggy_line, bug.fixed_line))
        self.add(tests(tested[1:] if variant != 2 else tested[1:].rsplit("/", 1)[0]))
        if tick:
            self.progress()

    def finish(self, answer: str, *checks: Call) -> tuple[Step, ...]:
        if checks:
            self.add(*checks)
        self.done = len(self.items)
        self.add(self.todos())
        return (*self.steps, answer)


def _rounding() -> Run:
    run = _Builder(["Reproduce the failures", "Fix money", "Fix currency", "Fix invoice", "Fix refunds"])
    run.add(run.todos())
    run.add(("ls", {"path": "/"}), ("glob", {"pattern": "**/*.py"}))
    run.add(tests())
    run.add(grep(r"Decimal\(", "/src"))
    run.progress()
    run.fix(_bug("money", 3), 0, tick=False)
    run.fix(_bug("money", 9), 1)
    run.fix(_bug("currency", 5), 0)
    run.add(read("/src/ledger/rounding.py"))  # no such file: a tool error
    run.add(("glob", {"pattern": "**/*round*"}))
    run.fix(_bug("invoice", 2), 2)
    run.fix(_bug("refunds", 7), 0)
    steps = run.finish(
        "Fixed five functions that rounded with `round(value, 2)` instead of quantizing to the currency's minor "
        "unit (money x2, currency, invoice, refunds). The core and billing suites pass for those modules.",
        tests("tests/core"),
        tests("tests/billing"),
    )
    return Run("rounding", _PROMPTS["rounding"], steps)


def _tax() -> Run:
    run = _Builder(["Read the VAT guidance", "Fix tax", "Fix discounts", "Fix customers", "Run the core suite"])
    run.add(run.todos())
    run.add(fetch("https://ledger.example/docs/vat-rounding"))
    run.progress()
    run.add(grep(r"quantize|round\(", "/src/ledger/tax.py"))
    run.fix(_bug("tax", 1), 1, tick=False)
    run.fix(_bug("tax", 6), 0)
    run.add(tests("tests/test_tax.py"))  # wrong path: the runner asks for a valid one
    run.add(tests("tests/core/test_tax.py"))
    run.fix(_bug("discounts", 4), 2)
    run.add(_two_in_progress(run))  # refused: the model sends the list again with one in progress
    run.add(run.todos())
    run.fix(_bug("customers", 2), 0)
    steps = run.finish(
        "Tax and discounts now round once, at the end, half-even in the currency's minor unit, as the guidance "
        "requires; customers' credit shares too. The core suite passes for these modules.",
        tests("tests/core"),
    )
    return Run("tax", _PROMPTS["tax"], steps)


def _two_in_progress(run: _Builder) -> Call:
    """A todo update with two items in progress (refused: the model retries with one)."""
    name, args = run.todos()
    todos = [dict(t) for t in args["todos"]]
    todos[run.done + 1]["status"] = "in_progress"
    return (name, {"todos": todos})


def _export() -> Run:
    run = _Builder(["Write the export tests", "Write the export module", "Document it", "Fix reports"])
    feature_tests = f"/tests/ops/test_{FEATURE}.py"
    run.add(run.todos())
    run.add(read("/src/ledger/reports.py"), read("/src/ledger/export_csv.py"))
    run.add(grep("def ", "/src/ledger/export_csv.py"))
    run.add(("write_file", {"path": feature_tests, "content": feature_test_source()}))
    run.add(tests(feature_tests[1:]))
    run.progress()
    run.add(("write_file", {"path": f"/src/ledger/{FEATURE}.py", "content": feature_module_source()}))
    run.add(tests(feature_tests[1:]))
    run.progress()
    run.add(read("/README.md"))
    run.add(edit("/README.md", "- `ledger.scheduler`: scheduler rules.", _README_LINE))
    run.add(read("/docs/rounding.md"))
    run.add(edit("/docs/rounding.md", "minor unit.\n", "minor unit.\nMonthly exports round each total once.\n"))
    run.progress()
    run.fix(_bug("reports", 3), 0)
    steps = run.finish(
        f"Added `ledger.{FEATURE}.monthly_rows` (one row per month and currency plus a totals row, half-even) "
        "with its tests, documented it, and fixed `reports`' rounding. The ops suite passes for these.",
        tests("tests/ops"),
    )
    return Run("export", _PROMPTS["export"], steps)


_README_LINE = (
    "- `ledger.scheduler`: scheduler rules.\n- `ledger.export_monthly`: monthly CSV rows per currency, with totals."
)


def _webhooks() -> Run:
    run = _Builder(["Read the webhook guide", "Fix webhooks", "Fix payments", "Fix storage", "Fix orders"])
    run.add(run.todos())
    run.add(fetch("https://payments.example/docs/webhooks"))
    run.add(tests())
    run.add(grep("webhook"), grep(r"Decimal\(amount\)", "/src"))
    run.progress()
    run.fix(_bug("webhooks", 1), 0, tick=False)
    run.fix(_bug("webhooks", 9), 0)
    run.fix(_bug("payments", 5), 2)
    run.fix(_bug("storage", 8), 1)
    run.fix(_bug("orders", 3), 0)
    steps = run.finish(
        "Webhook amounts, payments, stored balances and orders now quantize to the minor unit; a retried "
        "webhook records the same amount as the first delivery. Billing and ops suites pass for these modules.",
        tests("tests/billing"),
        tests("tests/ops"),
    )
    return Run("webhooks", _PROMPTS["webhooks"], steps)


def _fx() -> Run:
    run = _Builder(["Fix fx", "Fix scheduler", "Fix audit", "Run the affected suites"])
    run.add(run.todos())
    run.add(grep("audit_trail.append", "/src"))
    run.fix(_bug("fx", 2), 1, tick=False)
    run.fix(_bug("fx", 6), 0)
    run.fix(_bug("scheduler", 4), 2)
    run.fix(_bug("audit", 1), 0)
    steps = run.finish(
        "FX conversions, scheduler proration and audit amounts now quantize once; core and ops suites pass "
        "for these modules.",
        tests("tests/core"),
        tests("tests/ops"),
    )
    return Run("fx", _PROMPTS["fx"], steps)


def _release() -> Run:
    run = _Builder(["Run the whole suite", "Fix export_csv", "Fix reports", "CHANGELOG and version", "Suite green"])
    run.add(run.todos())
    run.add(tests())
    run.progress()
    run.fix(_bug("export_csv", 5), 0)
    run.fix(_bug("reports", 8), 1)
    run.add(read("/CHANGELOG.md"), read("/pyproject.toml"))
    run.add(edit("/CHANGELOG.md", CHANGELOG.split("\n\n")[-1].strip(), _changelog()))
    run.add(edit("/pyproject.toml", 'version = "0.9.0"', 'version = "1.0.0"'))
    run.progress()
    run.add(tests())
    steps = run.finish("Release 1.0 is ready: the whole suite passes, the CHANGELOG lists every fix, version 1.0.0.")
    return Run("release", _PROMPTS["release"], steps)


def _changelog() -> str:
    fixes = "\n".join(f"- `{b.module}.{b.name}` quantizes to the currency's minor unit." for b in BUGS)
    return f"- `ledger.{FEATURE}`: monthly CSV export.\n{fixes}"


_PROMPTS = {
    "rounding": "CI is red: invoice totals are off by a cent for JPY, KWD and BHD, and refunds round the wrong "
    "way. Find the causes and fix them without changing the public API. Keep a todo list.",
    "tax": "Next, tax. Read the VAT rounding guidance at https://ledger.example/docs/vat-rounding and make tax, "
    "discounts and customers follow it: round once, at the end, in the currency's minor unit.",
    "export": "Add a monthly CSV export (one row per month and currency, plus a totals row, rounded half-even). "
    "Write the tests first, document it, and fix the reports failure you saw in the list.",
    "webhooks": "Payments: retried webhooks record amounts that differ by a minor unit and stored balances drift. "
    "The provider's guide is at https://payments.example/docs/webhooks. Fix webhooks, payments, storage, orders.",
    "fx": "FX conversions, the scheduler's proration and the audit amounts still show rounding errors in "
    "production. Fix fx, scheduler and audit; re-read a file you changed before editing it again.",
    "release": "Prepare the 1.0 release: fix whatever still fails, make the whole suite pass, bump the version and "
    "add a CHANGELOG entry listing every fix.",
}
RUNS: tuple[Run, ...] = (_rounding(), _tax(), _export(), _webhooks(), _fx(), _release())
PHASES: tuple[str, ...] = tuple(run.phase for run in RUNS)
