"""Load a file of `benchmarks/` or `scripts/` as a module by its path (neither folder is a package on sys.path)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relative_path: str) -> ModuleType:
    """The module at `ROOT / relative_path`, loaded once per test process (under its file name)."""
    path = ROOT / relative_path
    name = path.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # registered first: dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module
