"""How a ratio of counts becomes the percent figure a table prints.

Two rules (``--rounding``):

- ``exact`` (the default): the ratio of the counts in percent, rounded once to one
  decimal with rational arithmetic, so no float error decides a figure; an exact tie
  (9/16 = 56.25 %) goes to the even tenth (56.2), as Python, NumPy and pandas round; None
  when the ratio is undefined (nothing to divide by).
- ``agentrewardbench``: the steps of AgentRewardBench's published scorer
  (``agent_reward_bench.eval.metrics``), so its tables are reproduced figure for figure.
  Accuracy is a mean first rounded to four decimals, then scaled and rounded to one
  (rounded twice: 32/39 = 0.820513 becomes 0.8205, 82.05, then 82.0 where the ratio
  says 82.1); precision, recall, NPV and TNR are scaled, then rounded to one decimal; F1
  is computed from precision and recall already rounded to four decimals; Python's
  ``round`` (half to even on the binary value) throughout. The scorer prints 0 for an
  undefined ratio; here it stays None, so the table's ``--undefined`` rule shows it
  (``--undefined zero`` prints the scorer's 0).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

from .metrics import Confusion

__all__ = ["ROUNDINGS", "Rounding", "percent", "percents"]

Rounding = Literal["exact", "agentrewardbench"]
ROUNDINGS: tuple[Rounding, ...] = ("exact", "agentrewardbench")


def _parts(c: Confusion, metric: str) -> tuple[int, int]:
    """(numerator, denominator) of `metric` over the counts."""
    if metric == "accuracy":
        return c.tp + c.tn, c.n
    if metric == "precision":
        return c.tp, c.tp + c.fp
    if metric == "recall":
        return c.tp, c.tp + c.fn
    if metric == "f1":
        return 2 * c.tp, 2 * c.tp + c.fp + c.fn
    if metric == "npv":
        return c.tn, c.tn + c.fn
    if metric == "tnr":
        return c.tn, c.tn + c.fp
    raise ValueError(f"unknown metric {metric!r}")


def _exact(c: Confusion, metric: str) -> float | None:
    num, den = _parts(c, metric)
    if den == 0:
        return None
    tenths = Fraction(1000 * num, den)  # the percentage in tenths
    return round(tenths) / 10  # Fraction rounds a tie to even


def _published(c: Confusion, metric: str) -> float | None:
    num, den = _parts(c, metric)
    if den == 0:
        return None
    if metric == "accuracy":
        return round(round(num / den, 4) * 100, 1)
    if metric == "f1":
        p = round(c.tp / (c.tp + c.fp), 4) if c.tp + c.fp else 0
        r = round(c.tp / (c.tp + c.fn), 4) if c.tp + c.fn else 0
        return 0.0 if p + r == 0 else round(2 * p * r / (p + r) * 100, 1)
    return round(num / den * 100, 1)


def percent(c: Confusion, metric: str, rounding: Rounding = "exact") -> float | None:
    """`metric` of the counts in percent, one decimal, by `rounding`; None when undefined."""
    if rounding == "exact":
        return _exact(c, metric)
    if rounding == "agentrewardbench":
        return _published(c, metric)
    raise ValueError(f"unknown rounding {rounding!r}: use {' or '.join(ROUNDINGS)}")


def percents(c: Confusion, metrics: tuple[str, ...], rounding: Rounding = "exact") -> dict[str, float | None]:
    return {m: percent(c, m, rounding) for m in metrics}
