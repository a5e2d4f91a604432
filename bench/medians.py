"""Medians over seeds in which a run that never reached its target counts as infinite.

Shared by the bench scripts that race to a return (`solving.py`, `sb3_race.py`,
`report.py`): a seed that fails is a failure, never left out of the median.
"""

from __future__ import annotations

import math
import statistics


def median_to_target(values) -> float:
    """The median of `values`, None (the target never reached) counting as infinite."""
    return statistics.median(math.inf if value is None else value for value in values)


def cell(value: float, spec: str, unit: str = "") -> str:
    """`value` formatted by `spec` and followed by `unit`, or 'not reached' if infinite."""
    return f"{format(value, spec)}{unit}" if math.isfinite(value) else "not reached"
