"""What `run_tests` prints for the coding session's project: a `pytest -v` log computed from the files on disk.

A planted bug fails its tests while its `round()` line is still in the module; the feature's test file, once
written, fails to collect until its module exists. Timings come from a call counter, so the same session prints
the same logs. The whole suite prints about 1,700 lines (some 35,000 tokens), one group about 500.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ._coding_project import BUGS, CURRENCIES, FEATURE, FEATURE_TESTS, GROUPS, MODULES, Bug, function_names, test_path

__all__ = ["TestRunner"]

_WIDTH = 80
_FEATURE_FILE = f"tests/ops/test_{FEATURE}.py"


def _rule(text: str, char: str = "=") -> str:
    text = f" {text} " if text else ""
    left = (_WIDTH - len(text)) // 2
    return char * left + text + char * (_WIDTH - left - len(text))


@dataclass
class TestRunner:
    """Runs the project's "tests" under `root`: `run('tests/core')` returns the log."""

    __test__ = False  # not a pytest test class

    root: Path
    calls: Counter[str] = field(default_factory=Counter[str], init=False)
    """Runs per path (the timings printed depend on the path and its run count, not on the order of parallel
    runs)."""
    last_summary: str | None = field(default=None, init=False)
    """The final line of the latest log (`'== 3 failed, 1661 passed in 41.27s =='`)."""

    def run(self, path: str = "tests") -> str:
        """The log of `pytest -v path`. Raises `LookupError` when `path` holds no tests."""
        path = path.strip().strip("/") or "tests"
        files = self._select(path)
        self.calls[path] += 1
        broken = FEATURE in files and not (self.root / "src/ledger" / f"{FEATURE}.py").is_file()
        tests = [t for f in files if not (f == FEATURE and broken) for t in self._tests(f)]
        failing = {node: bug for bug in self._unfixed() for node in bug.failing_tests}
        lines = [_rule("test session starts"), "platform linux -- Python 3.12.7, pytest-8.3.4, pluggy-1.5.0"]
        lines += ["rootdir: /workspace", "configfile: pyproject.toml"]
        lines += [f"collected {len(tests)} items" + (" / 1 error" if broken else ""), ""]
        failed: list[tuple[Bug, str]] = []
        for done, node in enumerate(tests, start=1):
            bug = failing.get(node)
            if bug is not None:
                failed.append((bug, node))
            outcome = "FAILED" if bug is not None else "PASSED"
            lines.append(f"{node} {outcome}".ljust(_WIDTH - 7) + f"[{done * 100 // len(tests):3d}%]")
        lines += _collection_error() if broken else []
        lines += _failures(failed)
        if failed or broken:
            lines.append(_rule("short test summary info"))
        lines += [f"FAILED {node} - AssertionError: rounded to 2 places" for _, node in failed]
        lines += [f"ERROR {_FEATURE_FILE} - ModuleNotFoundError: No module named 'ledger.{FEATURE}'"] if broken else []
        self.last_summary = _rule(self._summary(path, len(tests) - len(failed), len(failed), int(broken)))
        return "\n".join([*lines, self.last_summary])

    def _unfixed(self) -> list[Bug]:
        sources = {m: self._read(f"src/ledger/{m}.py") for m in {b.module for b in BUGS}}
        return [b for b in BUGS if b.buggy_line in sources[b.module]]

    def _read(self, relative: str) -> str:
        path = self.root / relative
        return path.read_text(encoding="utf-8") if path.is_file() else ""

    def _select(self, path: str) -> list[str]:
        """The modules whose test files `path` selects (the feature's, once its test file is written)."""
        modules = [*MODULES, *([FEATURE] if (self.root / _FEATURE_FILE).is_file() else [])]
        if path == "tests":
            return modules
        for group, members in GROUPS.items():
            if path == f"tests/{group}":
                return [m for m in modules if m in members or (group == "ops" and m == FEATURE)]
        found = [m for m in modules if path == _test_file(m)]
        if not found:
            raise LookupError(f"no tests found at {path!r}: use 'tests', a group ('tests/core') or a test file")
        return found

    @staticmethod
    def _tests(module: str) -> list[str]:
        names = FEATURE_TESTS if module == FEATURE else function_names(module)
        return [f"{_test_file(module)}::test_{name}[{c}]" for name in names for c in CURRENCIES]

    def _summary(self, path: str, passed: int, failed: int, errors: int) -> str:
        seed = self.calls[path] + sum(map(ord, path))
        seconds = f"{20 + (seed * 7) % 23}.{(seed * 37) % 100:02d}s"
        counts = [f"{failed} failed"] if failed else []
        counts.append(f"{passed} passed")
        counts += [f"{errors} error"] if errors else []
        return f"{', '.join(counts)} in {seconds}"


def _test_file(module: str) -> str:
    return _FEATURE_FILE if module == FEATURE else test_path(module)[1:]


def _failures(failed: list[tuple[Bug, str]]) -> list[str]:
    lines: list[str] = [_rule("FAILURES")] if failed else []
    for bug, node in failed:
        currency = node.rsplit("[", 1)[1].rstrip("]")
        lines += [
            _rule(f"test_{bug.name}[{currency}]", "_"),
            "",
            f"currency = '{currency}'",
            "",
            '    @pytest.mark.parametrize("currency", CURRENCIES)',
            f"    def test_{bug.name}(currency):",
            f'        result = {bug.name}(Decimal("10.005"), currency)',
            ">       assert result == result.quantize(Decimal(10) ** -DECIMALS[currency])",
            "E       AssertionError: assert Decimal('10.01') == Decimal('10')",
            "",
            f"{node.split('::', 1)[0]}:{12 + 6 * function_names(bug.module).index(bug.name)}: AssertionError",
        ]
    return lines


def _collection_error() -> list[str]:
    return [
        _rule("ERRORS"),
        _rule(f"ERROR collecting {_FEATURE_FILE}", "_"),
        f"ImportError while importing test module '/workspace/{_FEATURE_FILE}'.",
        "Traceback:",
        f"{_FEATURE_FILE}:3: in <module>",
        f"    from ledger.{FEATURE} import monthly_rows",
        f"E   ModuleNotFoundError: No module named 'ledger.{FEATURE}'",
    ]
