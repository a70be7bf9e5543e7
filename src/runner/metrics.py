"""A benchmark run's metrics, per domain and overall, and its cost per module.

Scores come from each task's ``result.json`` (an unevaluated rollout counts 0); a rollout
*succeeds* when its score is 1. A task whose setup or scorer failed on a rollout
(`TaskResult.errors`) is *errored*: it is left out of every rate below and counted beside
them (``errored``), never as 0. Per group of tasks (``tasks`` counts those scored):

- ``selected``: mean score of the rollout the strategy picked (one rollout: it; a strategy
  that picked none without failing: 0), over the tasks whose judge did not fail: *blind
  selection*, the figure a deployment gets (the judge judged every task);
- ``min_gain``: *minimum + gain*, oracle-filtered, as Agent-S's released selection scripts
  report it: a task whose rollouts all score alike counts that score without a judge (the
  evaluator's scores decide which tasks are judged), the others the pick's score (a failed
  judge's task left out, as for ``selected``). It equals ``selected`` except where the
  judge gave no pick, or failed, on a task whose rollouts agree, and it needs the
  evaluator, so it is not a selector anyone can deploy;
- ``judge_errors``: scored tasks whose judge failed for good (its selection carries an
  error): never counted as a score of 0, nor as a wrong pick; ``judged`` is the tasks
  ``selected`` averages over;
- ``critic_errors``: rollouts whose critic verdict carries an error (the retry strategy goes
  on to the next attempt; the scores stay the evaluator's);
- ``mean_rollout``: mean over tasks of the mean score of their rollouts;
- ``pass_at_n``: mean over tasks of the best rollout's score (an oracle selector);
- judge accuracy on the *judge subset*, the tasks with at least one success and one
  failure among their rollouts and a judge that answered: the share where the pick succeeded.

Cost follows the shape of Behavior Judge's table 8: per module, dollars, tokens and
seconds per task (mean, and median seconds, which API delays skew); ``rollout`` is one
rollout's agent (policy, grounding, coding, reflection) with its wall time from the header.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.atomic import write_json_atomic
from core.llm import CallRecord, Ledger
from core.trajectory import RunLayout, TaskResult

from .comparability import label_fields

__all__ = [
    "AGENT_MODULES",
    "MODULES",
    "SCORES_LEGEND",
    "SUMMARY_FILE",
    "BenchMetrics",
    "GroupMetrics",
    "JudgingErrors",
    "ModuleCost",
    "compute_metrics",
    "domain_of",
    "format_metrics",
    "group_metrics",
    "judging_errors",
    "minimum_plus_gain",
    "read_metrics",
    "selected_score",
    "write_metrics",
]

SUMMARY_FILE = "summary.json"
#: Modules of the agent itself: together they are the cost of a rollout.
AGENT_MODULES = ("policy", "grounding", "code_agent", "reflection")
#: Every module, in the order tables show them.
MODULES = (*AGENT_MODULES, "narrative", "judge", "prm", "critic")


#: What each rate of the table means (they are published under one name, "success rate").
SCORES_LEGEND = ("selected: blind selection, the judge's pick on every task; min+gain: minimum + gain, "
                 "oracle-filtered (tasks whose rollouts agree count without a judge, as Agent-S's released "
                 "scripts report); mean: the mean rollout; pass@{n}: the best rollout (an oracle)")


def _success(score: float | None) -> bool:
    return score is not None and score >= 1.0 - 1e-9


@dataclass
class GroupMetrics:
    """Rates over one group of tasks (a domain, or all)."""

    tasks: int = 0
    """Tasks scored: the rates' denominator."""
    errored: int = 0
    """Tasks left out of the rates: a rollout's setup or scorer failed (an error, not a 0)."""
    selected: float = 0.0
    min_gain: float = 0.0
    """Minimum + gain (oracle-filtered): see the module's docstring."""
    mean_rollout: float = 0.0
    pass_at_n: float = 0.0
    judge_subset: int = 0
    judge_correct: int = 0
    judged: int = 0
    """Scored tasks `selected` averages over: those whose judge did not fail."""
    judge_errors: int = 0
    """Scored tasks whose judge failed for good: an error, never a pick scoring 0."""
    critic_errors: int = 0
    """Rollouts of scored tasks whose critic verdict failed."""

    @property
    def judge_accuracy(self) -> float | None:
        return self.judge_correct / self.judge_subset if self.judge_subset else None


@dataclass
class ModuleCost:
    """One column of table 8: a module's cost per task (per rollout for ``rollout``)."""

    module: str
    calls: int = 0
    dollars: float = 0.0
    tokens: float = 0.0
    seconds: float = 0.0
    median_seconds: float = 0.0


@dataclass
class BenchMetrics:
    overall: GroupMetrics
    domains: dict[str, GroupMetrics] = field(default_factory=dict)
    modules: dict[str, ModuleCost] = field(default_factory=dict)
    n: int = 0
    """Most rollouts any task had."""

    def to_json(self) -> dict[str, Any]:
        def group(g: GroupMetrics) -> dict[str, Any]:
            rates: dict[str, Any] = {} if g.tasks else {"selected": None, "min_gain": None, "mean_rollout": None,
                                                         "pass_at_n": None}
            if not g.judged:  # no judge answered (or nothing scored): no rate, never 0
                rates["selected"] = None
            return {**asdict(g), **rates, "judge_accuracy": g.judge_accuracy}

        return {"n": self.n, "overall": group(self.overall),
                "domains": {d: group(g) for d, g in sorted(self.domains.items())},
                "modules": {m: asdict(c) for m, c in self.modules.items()}}


def domain_of(domains: dict[str, str], task_id: str) -> str:
    """The domain a task is counted under (``other`` when the run named none)."""
    return domains.get(task_id, "other")


def selected_score(result: TaskResult) -> float:
    """The task's score as the run counts it: the pick's (one rollout: its), else 0."""
    if result.selected is not None:
        return result.selected_score or 0.0
    if len(result.scores) == 1:
        return next(iter(result.scores.values())) or 0.0
    return 0.0


def minimum_plus_gain(result: TaskResult) -> float:
    """The task's score as Agent-S's released scripts count it: the common score when its
    rollouts all score alike (no judge asked), else the pick's (oracle-filtered)."""
    scores = [s or 0.0 for s in result.scores.values()] or [0.0]
    if len(set(scores)) == 1:
        return scores[0]
    return selected_score(result)


@dataclass(frozen=True)
class JudgingErrors:
    """What failed for good on one task besides its rollouts: its judge, its critic's verdicts."""

    judge: bool = False
    critic: int = 0


def group_metrics(results: list[TaskResult], errors: dict[str, JudgingErrors] | None = None) -> GroupMetrics:
    """Rates over the scored `results`, the errored ones counted apart, a failed judge's tasks
    left out of ``selected`` (see the module's docstring); `errors` by task id."""
    errors = errors or {}
    errored = sum(r.errored for r in results)
    results = [r for r in results if not r.errored]
    g = GroupMetrics(tasks=len(results), errored=errored)
    if not results:
        return g
    filtered = 0
    for r in results:
        failed = errors.get(r.task_id, JudgingErrors())
        g.critic_errors += failed.critic
        scores = [s or 0.0 for s in r.scores.values()] or [0.0]
        g.mean_rollout += sum(scores) / len(scores)
        g.pass_at_n += max(scores)
        if len(set(scores)) == 1 or not failed.judge:  # agreeing tasks are never judged
            filtered += 1
            g.min_gain += minimum_plus_gain(r)
        if failed.judge:
            g.judge_errors += 1  # an error, not a pick scoring 0 and not a wrong pick
            continue
        g.judged += 1
        g.selected += selected_score(r)
        wins = [_success(s) for s in r.scores.values()]
        if any(wins) and not all(wins):
            g.judge_subset += 1
            g.judge_correct += _success(r.selected_score) if r.selected is not None else 0
    g.selected = g.selected / g.judged if g.judged else 0.0
    g.min_gain = g.min_gain / filtered if filtered else 0.0
    g.mean_rollout /= len(results)
    g.pass_at_n /= len(results)
    return g


def judging_errors(layout: RunLayout, task_id: str) -> JudgingErrors:
    """The judge's and critic's final failures recorded for a task (blocking: reads files)."""
    task = layout.task(task_id)
    selection = task.read_selection()
    judge = bool(selection is not None and selection.error and not selection.strategy.startswith("retry-"))
    critic = 0
    for k in task.rollout_indices():
        for verdict in task.rollout(k).path.glob("critic-*.json"):
            try:
                data = json.loads(verdict.read_bytes())
            except (OSError, ValueError):
                continue
            critic += bool(isinstance(data, dict) and data.get("error"))
    return JudgingErrors(judge=judge, critic=critic)


def _costs(layout: RunLayout, records: Iterable[CallRecord], tasks: list[str]) -> dict[str, ModuleCost]:
    """Per module, the mean (and median seconds) per task; ``rollout`` per rollout."""
    known = set(tasks)
    per_task: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0, 0.0, 0.0]))
    per_rollout: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for r in records:
        task = r.tags.get("task")
        if task not in known:
            continue
        cell = per_task[r.module][task]
        cell[0] += 1
        cell[1] += r.dollars
        cell[2] += r.input_tokens + r.output_tokens
        cell[3] += r.seconds
        if r.module in AGENT_MODULES and "rollout" in r.tags:
            roll = per_rollout[(task, r.tags["rollout"])]
            roll[0] += 1
            roll[1] += r.dollars
            roll[2] += r.input_tokens + r.output_tokens
    out: dict[str, ModuleCost] = {}
    walls = [info.ended_at - info.started_at for t in tasks for info in layout.task(t).headers().values()
             if info is not None and info.ended_at is not None]
    if walls or per_rollout:
        count = max(len(walls), len(per_rollout), 1)
        out["rollout"] = ModuleCost(
            "rollout", calls=int(sum(v[0] for v in per_rollout.values())),
            dollars=sum(v[1] for v in per_rollout.values()) / count,
            tokens=sum(v[2] for v in per_rollout.values()) / count,
            seconds=statistics.fmean(walls) if walls else 0.0,
            median_seconds=statistics.median(walls) if walls else 0.0)
    n_tasks = max(len(tasks), 1)
    for module in [*MODULES, *sorted(set(per_task) - set(MODULES))]:
        cells = per_task.get(module)
        if not cells:
            continue
        seconds = [cells[t][3] if t in cells else 0.0 for t in tasks]
        out[module] = ModuleCost(
            module, calls=int(sum(c[0] for c in cells.values())),
            dollars=sum(c[1] for c in cells.values()) / n_tasks,
            tokens=sum(c[2] for c in cells.values()) / n_tasks,
            seconds=sum(seconds) / n_tasks, median_seconds=statistics.median(seconds) if seconds else 0.0)
    return out


def compute_metrics(layout: RunLayout, domains: dict[str, str] | None = None) -> BenchMetrics:
    """Metrics of every task of `layout` that has a result (blocking: reads the run)."""
    domains = domains or {}
    results: dict[str, TaskResult] = {}
    for task_id in layout.task_ids():
        result = layout.task(task_id).read_result()
        if result is not None:
            results[task_id] = result
    by_domain: dict[str, list[TaskResult]] = defaultdict(list)
    for task_id, result in results.items():
        by_domain[domain_of(domains, task_id)].append(result)
    errors = {task_id: judging_errors(layout, task_id) for task_id in results}
    records = Ledger.iter_records(layout.ledger_path)  # streamed: a benchmark's ledger is ~1 GiB as objects
    return BenchMetrics(
        overall=group_metrics(list(results.values()), errors),
        domains={d: group_metrics(rs, errors) for d, rs in by_domain.items()},
        modules=_costs(layout, records, sorted(results)),
        n=max((r.n for r in results.values()), default=0),
    )


def write_metrics(layout: RunLayout, metrics: BenchMetrics) -> Path:
    path = layout.path / SUMMARY_FILE
    layout.path.mkdir(parents=True, exist_ok=True)
    # Scores are only comparable under the same scorer (OSWorld's own functions, this version)
    # and on the same apps: the environment's label says whether they are the leaderboard's.
    data = {**metrics.to_json(), **label_fields(layout)}
    write_json_atomic(path, data, durable=layout.durable)
    return path


def read_metrics(layout: RunLayout) -> dict[str, Any] | None:
    """``summary.json`` as written, or None."""
    try:
        data = json.loads((layout.path / SUMMARY_FILE).read_bytes())
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else None


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def format_metrics(metrics: BenchMetrics) -> str:
    """The rates per domain and overall, then the cost per module, as plain-text tables."""
    head = (f"{'domain':<22}{'run':>5}{'scored':>8}{'errored':>8}{'selected %':>12}{'min+gain %':>12}{'mean %':>9}"
            f"{f'pass@{metrics.n} %':>12}{'judge acc %':>13}{'subset':>8}{'judge err':>11}{'critic err':>12}")
    lines = [head]
    rows = [*sorted(metrics.domains.items()), ("overall", metrics.overall)]
    for name, g in rows:
        scored = g.tasks > 0  # no task scored: no rate, never 0
        mean, best, filtered = (_pct(x) if scored else "—" for x in (g.mean_rollout, g.pass_at_n, g.min_gain))
        selected = _pct(g.selected) if g.judged else "—"  # every judge failed: no rate, never 0
        lines.append(f"{name:<22}{g.tasks + g.errored:>5}{g.tasks:>8}{g.errored:>8}{selected:>12}{filtered:>12}{mean:>9}"
                     f"{best:>12}{_pct(g.judge_accuracy):>13}{g.judge_subset:>8}{g.judge_errors:>11}"
                     f"{g.critic_errors:>12}")
    lines.append(SCORES_LEGEND.format(n=metrics.n))
    if metrics.modules:
        lines += ["", f"{'per task':<22}" + "".join(f"{m:>12}" for m in metrics.modules)]
        for label, key, fmt in (("calls", "calls", "{:.0f}"), ("dollars", "dollars", "{:.4f}"),
                                ("tokens", "tokens", "{:.0f}"), ("mean seconds", "seconds", "{:.1f}"),
                                ("median seconds", "median_seconds", "{:.1f}")):
            lines.append(f"{label:<22}" + "".join(f"{fmt.format(getattr(c, key)):>12}" for c in metrics.modules.values()))
        lines.append("(rollout: per rollout, its agent's calls and wall time; other modules: per task)")
    if metrics.overall.errored:
        lines.insert(len(rows) + 1, "(scored: the rates' denominator; errored: setup or scorer failed, left out "
                                    "of every rate, not counted as 0)")
    if metrics.overall.judge_errors:
        lines.insert(len(rows) + 1, f"(selected %: over the {metrics.overall.judged} scored tasks whose judge "
                                    "answered; a failed judge is an error, not a score of 0)")
    return "\n".join(lines)
