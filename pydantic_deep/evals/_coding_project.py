"""The coding session's project: `ledger`, a billing library of 16 modules with bugs planted in some functions,
its test suite (one parametrized test per function and currency), and what running the suite prints.

Everything is generated from fixed tables, so the same project and the same logs come out every time. A bug is
a function whose last line rounds with `round()` instead of `quantize()`; its tests fail (for the currencies
without two decimals) until the session's edit replaces that line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BUGS",
    "CURRENCIES",
    "FEATURE",
    "FEATURE_TESTS",
    "GROUPS",
    "MODULES",
    "Bug",
    "document",
    "feature_module_source",
    "feature_test_source",
    "function_names",
    "module_path",
    "test_path",
    "write_project",
]

GROUPS: dict[str, tuple[str, ...]] = {
    "core": ("money", "currency", "fx", "tax", "discounts"),
    "billing": ("invoice", "orders", "payments", "refunds", "customers"),
    "ops": ("reports", "export_csv", "storage", "audit", "webhooks", "scheduler"),
}
MODULES: tuple[str, ...] = tuple(m for group in GROUPS.values() for m in group)
CURRENCIES = ("EUR", "USD", "GBP", "JPY", "CHF", "KWD", "SEK", "BHD")
_ODD_CURRENCIES = ("JPY", "KWD", "BHD")
"""The currencies without two decimals: a `round(value, 2)` bug shows in their tests."""
_VERBS = ("compute", "apply", "split", "convert", "format", "validate", "merge", "normalize", "total", "allocate")
_NOUNS = ("amount", "lines", "balance", "rate", "fee", "credit", "share", "period", "batch", "ledger", "entry")


def function_names(module: str) -> list[str]:
    """The public functions of a module, in file order."""
    index = MODULES.index(module)
    count = 10 + (index * 3) % 7
    return [f"{_VERBS[(index + i) % len(_VERBS)]}_{_NOUNS[(index * 2 + i) % len(_NOUNS)]}_{i}" for i in range(count)]


def _group(module: str) -> str:
    return next(g for g, members in GROUPS.items() if module in members)


def module_path(module: str) -> str:
    return f"/src/ledger/{module}.py"


def test_path(module: str) -> str:
    return f"/tests/{_group(module)}/test_{module}.py"


@dataclass(frozen=True)
class Bug:
    """A planted bug: function `function` of `module` rounds with `round()`; the fix quantizes."""

    module: str
    function: int

    @property
    def name(self) -> str:
        return function_names(self.module)[self.function]

    @property
    def buggy_line(self) -> str:
        return f"    return Decimal(round(value, 2))  # {self.module}.{self.name}"

    @property
    def fixed_line(self) -> str:
        return f"    return value.quantize(places, rounding=ROUND_HALF_EVEN)  # {self.module}.{self.name}"

    @property
    def failing_tests(self) -> list[str]:
        return [f"{test_path(self.module)[1:]}::test_{self.name}[{c}]" for c in _ODD_CURRENCIES]


BUGS: tuple[Bug, ...] = (
    Bug("money", 3),
    Bug("currency", 5),
    Bug("invoice", 2),
    Bug("refunds", 7),
    Bug("money", 9),
    Bug("tax", 1),
    Bug("discounts", 4),
    Bug("customers", 2),
    Bug("tax", 6),
    Bug("reports", 3),
    Bug("webhooks", 1),
    Bug("payments", 5),
    Bug("storage", 8),
    Bug("webhooks", 9),
    Bug("orders", 3),
    Bug("fx", 2),
    Bug("scheduler", 4),
    Bug("audit", 1),
    Bug("fx", 6),
    Bug("export_csv", 5),
    Bug("reports", 8),
)


def _function(module: str, name: str, i: int, buggy: bool) -> list[str]:
    factor = f"{1 + (i * 7) % 13}.{(i * 37) % 100:02d}"
    last = Bug(module, i)
    return [
        f"def {name}(amount: Decimal | int | str, currency: str = DEFAULT_CURRENCY) -> Decimal:",
        f'    """{name.replace("_", " ").capitalize()} for `{module}` (factor {factor}), in minor units."""',
        "    places = Decimal(10) ** -DECIMALS.get(currency, 2)",
        f'    value = Decimal(amount) * Decimal("{factor}")',
        "    if value < 0:",
        f'        raise LedgerError(f"{name}: negative amount {{value}} {{currency}}")',
        f"    audit_trail.append(({module!r}, {name!r}, str(value)))",
        last.buggy_line if buggy else last.fixed_line,
        "",
        "",
    ]


def module_source(module: str) -> str:
    """The module as first written (with its planted bugs)."""
    buggy = {b.function for b in BUGS if b.module == module}
    lines = [
        f'"""ledger.{module}: the {module.replace("_", " ")} rules of the billing library."""',
        "",
        "from __future__ import annotations",
        "",
        "from decimal import ROUND_HALF_EVEN, Decimal",
        "",
        "from .errors import LedgerError",
        "from .units import DECIMALS, DEFAULT_CURRENCY",
        "",
        "audit_trail: list[tuple[str, str, str]] = []",
        "",
        "",
    ]
    for i, name in enumerate(function_names(module)):
        lines += _function(module, name, i, i in buggy)
    return "\n".join(lines).rstrip() + "\n"


def test_source(module: str) -> str:
    lines = [
        "import pytest",
        "from decimal import Decimal",
        "",
        f"from ledger.{module} import {', '.join(function_names(module))}",
        "from ledger.units import DECIMALS",
        "",
        f"CURRENCIES = {list(CURRENCIES)!r}",
        "",
    ]
    for name in function_names(module):
        lines += [
            "",
            '@pytest.mark.parametrize("currency", CURRENCIES)',
            f"def test_{name}(currency):",
            f'    result = {name}(Decimal("10.005"), currency)',
            "    assert result == result.quantize(Decimal(10) ** -DECIMALS[currency])",
            "",
        ]
    return "\n".join(lines)


_UNITS = f'''"""Minor units per currency (ISO 4217)."""

DEFAULT_CURRENCY = "EUR"
DECIMALS = {{{", ".join(f'"{c}": {3 if c in ("KWD", "BHD") else 0 if c == "JPY" else 2}' for c in CURRENCIES)}}}
'''
_ERRORS = '''"""Errors of the billing library."""


class LedgerError(ValueError):
    """A rule of the ledger was broken."""
'''
README = (
    """# ledger

Billing rules: money, currencies, taxes, invoices, payments and reports.

Run the tests with `python -m pytest -q`.

## Modules

"""
    + "\n".join(f"- `ledger.{m}`: {m.replace('_', ' ')} rules." for m in MODULES)
    + "\n"
)
CHANGELOG = "# Changelog\n\n## Unreleased\n\n- Nothing yet.\n"


FEATURE = "export_monthly"
"""The module the session adds (its test file first: the tests fail to collect until the module exists)."""
FEATURE_TESTS = ("monthly_rows", "currency_column", "totals_row")


def feature_test_source() -> str:
    lines = ["import pytest", "", f"from ledger.{FEATURE} import monthly_rows", ""]
    for name in FEATURE_TESTS:
        lines += [
            "",
            f'@pytest.mark.parametrize("currency", {list(CURRENCIES)!r})',
            f"def test_{name}(currency):",
            '    rows = monthly_rows([("2026-01-31", "10.005", currency)], currency)',
            f'    assert rows and rows[0]["currency"] == currency  # {name}',
            "",
        ]
    return "\n".join(lines)


def feature_module_source() -> str:
    return '''"""ledger.export_monthly: one CSV row per month and currency, with a totals row."""

from __future__ import annotations

from collections import defaultdict
from decimal import ROUND_HALF_EVEN, Decimal

from .units import DECIMALS


def monthly_rows(entries: list[tuple[str, str, str]], currency: str) -> list[dict[str, str]]:
    """Sum `(date, amount, currency)` entries per month, rounded half-even to the currency's minor unit."""
    places = Decimal(10) ** -DECIMALS.get(currency, 2)
    months: dict[str, Decimal] = defaultdict(Decimal)
    for date, amount, entry_currency in entries:
        if entry_currency == currency:
            months[date[:7]] += Decimal(amount)
    rows = [
        {"month": month, "currency": currency, "total": str(total.quantize(places, rounding=ROUND_HALF_EVEN))}
        for month, total in sorted(months.items())
    ]
    grand = sum(months.values(), Decimal(0)).quantize(places, rounding=ROUND_HALF_EVEN)
    return [*rows, {"month": "total", "currency": currency, "total": str(grand)}]
'''


def write_project(root: Path) -> None:
    """Write the project under `root` (made if missing)."""
    files: dict[str, str] = {
        "README.md": README,
        "CHANGELOG.md": CHANGELOG,
        "pyproject.toml": '[project]\nname = "ledger"\nversion = "0.9.0"\n',
        "src/ledger/__init__.py": '"""The billing library."""\n',
        "src/ledger/units.py": _UNITS,
        "src/ledger/errors.py": _ERRORS,
        "docs/rounding.md": "# Rounding\n\nAmounts are rounded half-even to the currency's minor unit.\n",
    }
    for module in MODULES:
        files[module_path(module)[1:]] = module_source(module)
        files[test_path(module)[1:]] = test_source(module)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


_TOPICS = ("rounding", "minor units", "half-even", "allocation", "reverse charge", "idempotency", "retries")


def document(title: str, paragraphs: int = 60) -> str:
    """A long reference page (about 130 tokens per paragraph), as a fetch tool would deliver it."""
    lines = [f"# {title}", ""]
    for i in range(paragraphs):
        topic = _TOPICS[i % len(_TOPICS)]
        if i % 8 == 0:
            lines += [f"## {i // 8 + 1}. {topic.capitalize()}", ""]
        lines += [
            f"Paragraph {i + 1}. When {topic} applies, an amount is first converted to the currency's minor unit, "
            f"then the rule for {topic} decides how the remainder is distributed. Implementations must keep the "
            f"sum of the parts equal to the whole, report the rounding difference explicitly, and never round an "
            f"intermediate value twice; rule {i + 1} of this section gives the worked example for {topic} with "
            f"{CURRENCIES[i % len(CURRENCIES)]} amounts, three decimal places in, {i % 4} out.",
            "",
        ]
    return "\n".join(lines)
