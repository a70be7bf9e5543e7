"""Critic metrics: accuracy, precision, recall, F1, NPV and TNR, overall and per platform.

Inputs are (label, prediction, platform) triples with 1 meaning "the task succeeded" /
"the critic accepted it". Degenerate cases are defined, not left to a division error:

- **empty set** (n = 0): every metric is None.
- **no predicted positives** (tp + fp = 0): precision is None (undefined: the critic never
  accepted anything, so there is no purity to measure).
- **no positives in the set** (tp + fn = 0): recall is None (nothing to find).
- **F1** is computed as 2·tp / (2·tp + fp + fn), which equals the harmonic mean of
  precision and recall whenever both are defined, is 0 when there were positives or
  accepted trajectories but none was a true positive, and is None only when tp + fp + fn
  = 0 (no positives and none predicted).
- **NPV** (negative predictive value, tn / (tn + fn)) is None when nothing was rejected;
  **TNR** (true negative rate, tn / (tn + fp)) is None when nothing failed.

None is shown as "—" in tables and null in JSON. Papers that print 0 for undefined
values can be matched with ``undefined=0.0``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

__all__ = ["METRICS", "Confusion", "Scores", "score", "score_by_platform"]

#: The ratios every group gets, in table order.
METRICS = ("accuracy", "precision", "recall", "f1", "npv", "tnr")

Triple = tuple[int, int, str]


@dataclass(frozen=True, slots=True)
class Confusion:
    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.tn + self.fn

    @classmethod
    def of(cls, pairs: Iterable[tuple[int, int]]) -> Confusion:
        tp = fp = tn = fn = 0
        for label, prediction in pairs:
            if label not in (0, 1) or prediction not in (0, 1):
                raise ValueError(f"labels and predictions must be 0 or 1, not {label!r} / {prediction!r}")
            if prediction:
                tp, fp = (tp + 1, fp) if label else (tp, fp + 1)
            else:
                fn, tn = (fn + 1, tn) if label else (fn, tn + 1)
        return cls(tp, fp, tn, fn)


class Scores(BaseModel):
    """Metrics of one group of trajectories (all, or one platform)."""

    model_config = ConfigDict(frozen=True)

    n: int
    positives: int
    """Trajectories labelled successful."""
    predicted: int
    """Trajectories the critic accepted."""
    tp: int
    fp: int
    tn: int
    fn: int
    accuracy: float | None
    precision: float | None
    recall: float | None
    f1: float | None
    npv: float | None = None
    """Negative predictive value: of the trajectories the critic rejected, how many failed."""
    tnr: float | None = None
    """True negative rate: of the failed trajectories, how many the critic rejected."""

    @property
    def confusion(self) -> Confusion:
        return Confusion(self.tp, self.fp, self.tn, self.fn)


def _ratio(num: int, den: int, undefined: float | None) -> float | None:
    return num / den if den else undefined


def score(triples: Iterable[tuple[int, int]] | Iterable[Triple], *, undefined: float | None = None) -> Scores:
    """Metrics over (label, prediction[, platform]) items; see the module docstring."""
    c = Confusion.of((t[0], t[1]) for t in triples)
    return Scores(
        n=c.n,
        positives=c.tp + c.fn,
        predicted=c.tp + c.fp,
        tp=c.tp,
        fp=c.fp,
        tn=c.tn,
        fn=c.fn,
        accuracy=_ratio(c.tp + c.tn, c.n, undefined),
        precision=_ratio(c.tp, c.tp + c.fp, undefined),
        recall=_ratio(c.tp, c.tp + c.fn, undefined),
        f1=_ratio(2 * c.tp, 2 * c.tp + c.fp + c.fn, undefined),
        npv=_ratio(c.tn, c.tn + c.fn, undefined),
        tnr=_ratio(c.tn, c.tn + c.fp, undefined),
    )


def score_by_platform(triples: Iterable[Triple], *, undefined: float | None = None) -> dict[str, Scores]:
    """``{"overall": ..., "<platform>": ...}``, platforms sorted by name."""
    items = list(triples)
    out = {"overall": score(items, undefined=undefined)}
    for platform in sorted({t[2] for t in items}):
        out[platform] = score([t for t in items if t[2] == platform], undefined=undefined)
    return out
