"""Run every ```python block of the docs and the README as its own test case.

Each block is self-contained (its own imports) and runs offline in a fresh module namespace, with model requests
to real providers disabled. A block fenced as ```python {test="skip"} is not run. Test ids are `file:line`.
"""

from __future__ import annotations

import logging
import re
import sys
import types
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic_ai import models

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Example:
    path: Path
    line: int
    """1-based line of the block's first code line."""
    code: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def _is_python(info: str) -> bool:
    words = info.replace("{", " {").split()
    return bool(words) and words[0] in {"python", "py"}


def _is_skipped(info: str) -> bool:
    return re.search(r"""\btest\s*=\s*["']?skip\b""", info) is not None


def collect_examples(path: Path) -> list[Example]:
    """The ```python blocks of one Markdown file (nested and indented fences included)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    examples: list[Example] = []
    i = 0
    while i < len(lines):
        match = _OPEN.match(lines[i])
        if match is None:
            i += 1
            continue
        indent, fence, info = match["indent"], match["fence"], match["info"].strip()
        body: list[str] = []
        j = i + 1
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        while j < len(lines) and not closing.match(lines[j]):
            line = lines[j]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        if _is_python(info) and not _is_skipped(info):
            examples.append(Example(path, i + 2, "\n".join(body) + "\n"))
        i = j + 1
    return examples


EXAMPLES = [example for path in DOC_FILES if path.exists() for example in collect_examples(path)]


def test_examples_were_found() -> None:
    """An empty collection must fail rather than pass silently."""
    assert (ROOT / "README.md").exists()
    assert len(EXAMPLES) >= 10, f"only {len(EXAMPLES)} python blocks found in docs/ and README.md"


@pytest.mark.filterwarnings("ignore:open_binary is deprecated:DeprecationWarning")  # inside bpe-openai
@pytest.mark.parametrize("example", [pytest.param(e, id=e.id) for e in EXAMPLES])
def test_docs_example(
    example: Example, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each example runs and prints no warning (a fresh process's once-per-name warnings included) beyond the
    failures it demonstrates."""
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", False)
    monkeypatch.chdir(tmp_path)  # an example that writes files writes them here
    _run_example(example, monkeypatch, caplog)


@pytest.mark.filterwarnings("ignore:open_binary is deprecated:DeprecationWarning")  # inside bpe-openai
@pytest.mark.parametrize("example", [pytest.param(e, id=e.id) for e in EXAMPLES])
def test_docs_example_runs_twice(
    example: Example, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A user runs a snippet again in the same directory: the files the first run left (histories, memory,
    backend files) must not make the second run fail, warn, or break its assertions."""
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", False)
    monkeypatch.chdir(tmp_path)
    _run_example(example, monkeypatch, caplog)
    caplog.clear()
    _run_example(example, monkeypatch, caplog)


def _run_example(example: Example, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Execute one example in a fresh module, as a fresh process would, and fail on any warning it emits."""
    _forget_warnings(monkeypatch)
    module_name = "docs_example_" + re.sub(r"\W", "_", example.id)
    module = types.ModuleType(module_name)
    module.__file__ = str(example.path)
    monkeypatch.setitem(sys.modules, module_name, module)  # dataclasses and pydantic resolve names through it
    # Pad with blank lines so tracebacks point at the Markdown file's own line numbers.
    source = "\n" * (example.line - 1) + example.code
    code = compile(source, str(example.path), "exec")
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        _python_default_filters()  # what a user's script shows
        exec(code, module.__dict__)
    logged = [
        f"{r.levelname}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno == logging.WARNING and not any(p.search(r.getMessage()) for p in _DEMONSTRATED)
    ]
    assert not logged, f"the example logged warnings: {logged}"
    assert not caught, f"the example raised warnings: {[str(w.message) for w in caught]}"


_DEMONSTRATED = [
    # Examples that show what happens on a failure, and say so in the text around them.
    re.compile(r"^summarizer \S+ failed"),
    re.compile(r"^could not evict the output"),
    re.compile(r"^damaged history file: "),  # persistence.md tears a file and corrupts one on purpose
    re.compile(r"'acme:unreleased-model'"),
]


def _python_default_filters() -> None:
    warnings.simplefilter("default")
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.simplefilter("ignore", category)


def _forget_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The once-per-process warnings, as a fresh process has them (so every example is checked)."""
    from summarization_pydantic_ai import _windows
    from summarization_pydantic_ai.context_manager import _counting
    from summarization_pydantic_ai.processors import _base

    monkeypatch.setattr(_windows, "_warned", set[str]())
    monkeypatch.setattr(_counting, "_defaulted", set[str]())
    monkeypatch.setattr(_base, "_warned_defaults", set[str]())
