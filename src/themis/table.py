"""The critic-bench table: one row per critic and group, figures in percent as a rounding
rule makes them (`themis.rounding`), and under it how errors, missing predictions,
unmatched ids, undefined ratios and empty groups were counted; and the same as JSON."""

from __future__ import annotations

from collections.abc import Sequence

from .bench import BenchResult
from .metrics import METRICS, Scores
from .rounding import percents

__all__ = ["figures", "render_table", "results_json"]

_HEADS = {"accuracy": "acc", "precision": "prec", "recall": "rec", "f1": "f1", "npv": "npv", "tnr": "tnr"}


def figures(result: BenchResult, scores: Scores) -> dict[str, float | None]:
    """The percent figures of one group as the table prints them (None: undefined, or empty)."""
    if scores.n == 0:
        return dict.fromkeys(METRICS)
    shown = percents(scores.confusion, METRICS, result.rounding)
    if result.undefined == "zero":
        shown = {m: 0.0 if v is None else v for m, v in shown.items()}
    return shown


def _cell(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def render_table(results: Sequence[BenchResult], *, groups: bool = True) -> str:
    """A plain-text table: one row per critic and group, metrics in percent; under it, how
    errors, missing predictions and unmatched ids were counted."""
    header = ["critic", "group", "n", "pos", "pred", "err", "miss", *(_HEADS[m] for m in METRICS)]
    rows = [header]
    for r in results:
        for group, s in r.scores.items():
            if group != "overall" and not groups:
                continue
            err = len(r.errors) if group == "overall" else r.group_errors.get(group, 0)
            gone = len(r.missing) if group == "overall" else r.group_missing.get(group, 0)
            cells = ["empty", *[""] * (len(METRICS) - 1)] if s.n == 0 and not err and not gone \
                else [_cell(v) for v in figures(r, s).values()]
            rows.append([r.name, group, str(s.n), str(s.positives), str(s.predicted), str(err), str(gone), *cells])
        if groups and r.macro:
            rows.append([r.name, "macro", "", "", "", "", "",
                         *(_cell(None if r.macro.get(m) is None else 100 * r.macro[m]) for m in METRICS)])  # type: ignore[operator]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in results:
        rule = "counted as rejections (0)" if r.on_error == "reject" else "excluded from the metrics"
        miss = "left out" if r.skip_missing else "counted as 0"
        empty = [g for g in r.leaves if r.scores[g].n == 0]
        lines.append(
            f"{r.name}: {len(r.errors)} errors ({rule}), {len(r.missing)} without prediction ({miss}), "
            f"{len(r.unmatched)} predictions matching no label; undefined ratios: {r.undefined}; "
            f"rounding: {r.rounding}; groups by {','.join(r.by)}"
            + (f" ({len(empty)} empty: {', '.join(empty[:5])}{', ...' if len(empty) > 5 else ''})" if empty else "")
            + ("; overall is the micro average, macro the mean over the non-empty groups" if r.macro else ""))
    return "\n".join(lines)


def results_json(results: Sequence[BenchResult]) -> dict[str, object]:
    """Everything the table shows (``figures``: the printed percentages per group), plus
    predictions, missing ids and errors, for ``--json``."""
    out: dict[str, object] = {}
    for r in results:
        data = r.model_dump(mode="json")
        data["figures"] = {group: figures(r, s) for group, s in r.scores.items()}
        data["empty_groups"] = [g for g in r.leaves if r.scores[g].n == 0]
        out[r.name] = data
    return out
