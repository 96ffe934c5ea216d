"""How many examples a property test draws, in the default run and in the slow tier.

The default run (`pytest`) draws a quick sample of the most expensive properties; the slow tier (`pytest -m slow`,
which CI also runs) draws the full count the issues ask for. `PROPERTY_EXAMPLES_SCALE=10` searches harder in both.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.strategies import SearchStrategy

SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))


def examples(n: int) -> settings:
    """Settings drawing `n` examples (scaled), with no deadline: the processors' cost varies with the history."""
    return settings(max_examples=int(n * SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def in_two_tiers(
    check: Callable[..., None], *strategies: SearchStrategy[Any], quick: int, full: int
) -> tuple[Callable[..., None], Callable[..., None]]:
    """The property `check` as two tests: `quick` examples in the default run, `full` in the slow tier.

    Assign both to module-level `test_...` names: pytest names each test by the attribute that holds it.
    """
    default = examples(quick)(given(*strategies)(check))
    slow = pytest.mark.slow(examples(full)(given(*strategies)(check)))
    return default, slow
