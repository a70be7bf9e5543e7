"""Sweeps over mixtures and N by subsampling pools of rollouts (Behavior Judge's table 5
and figure 4) without running a rollout again.

Pools come from run folders with many rollouts per task, grouped by each rollout's policy
model. A mixture ``gpt-5*5,claude*5`` asks for that many rollouts of each model; at
another N its counts are scaled to N (largest remainders). For each of `samples` draws
(seeded) every task gets such a subset, drawn without replacement from its pools; the
judge picks one rollout. Each point reports, each under its own name:

- ``blind``: the score of the judge's pick on every subset, what a deployment of the
  selector gets. A subset whose rollouts all scored 0 needs no call (every outcome is 0);
  one whose rollouts all succeeded is still judged;
- ``min_gain``: *minimum + gain*, oracle-filtered as Agent-S's released selection scripts
  report: a subset whose rollouts all score alike counts that score without a judge (the
  evaluator's scores decide what is judged), the others the pick's score;
- ``mean_rollout``: the subsets' mean rollout score; ``pass_at_n``: their best (an oracle).

`oracle_only` skips the calls only blind selection needs (``blind`` is then None).
Candidates are narrated once per rollout from the fact cache of the run the rollout
belongs to, so facts narrated while the run ran cost nothing. Confidence intervals are
percentile bootstraps over tasks (seeded). A judge that fails for good on a subset (no
usable answer, a refusal, a spend limit) is counted in `judge_errors` and that draw is left
out of the figures that needed it: never scored as a pick.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bjudge import Candidate, JudgeConfig, NarrativeBuilder, NarrativeConfig, make_judge
from bjudge.representations import narrate_rollout
from core.llm import ChatModel
from core.trajectory import AGENT_OUTCOMES, RunLayout, rollout_error

from .wide import fact_cache

__all__ = [
    "MixtureSpec",
    "PoolRollout",
    "SweepError",
    "SweepPoint",
    "errored_rollouts",
    "load_pools",
    "parse_mixtures",
    "scaled_counts",
    "sweep",
]

_PART = re.compile(r"^\s*([^*]+?)\s*(?:\*\s*(\d+))?\s*$")


class SweepError(ValueError):
    """Sweep settings that cannot be evaluated; the message says what to change."""


@dataclass(frozen=True)
class MixtureSpec:
    """A mixture: (model name, count) pairs, e.g. ``gpt-5*5,claude*5``."""

    parts: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return sum(c for _, c in self.parts)

    @property
    def label(self) -> str:
        return ",".join(f"{m}*{c}" for m, c in self.parts)


def parse_mixtures(text: str) -> list[MixtureSpec]:
    """``"a*5,b*5;a*10"`` → two mixtures (``;`` separates them, a count defaults to 1)."""
    out = []
    for chunk in (c for c in text.split(";") if c.strip()):
        parts = []
        for piece in chunk.split(","):
            m = _PART.match(piece)
            if m is None or not m.group(1):
                raise SweepError(f"cannot read {piece!r} in --mixtures: write model*count, e.g. gpt-5*5")
            count = int(m.group(2) or 1)
            if count < 1:
                raise SweepError(f"{piece!r}: a count must be at least 1")
            parts.append((m.group(1), count))
        out.append(MixtureSpec(tuple(parts)))
    if not out:
        raise SweepError("--mixtures is empty: name at least one model, e.g. gpt-5*4")
    return out


def scaled_counts(mixture: MixtureSpec, n: int) -> list[int]:
    """The mixture's counts scaled to N rollouts (largest remainders; ties by order)."""
    if n == mixture.total:
        return [c for _, c in mixture.parts]
    exact = [c * n / mixture.total for _, c in mixture.parts]
    counts = [int(x) for x in exact]
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return counts


@dataclass(frozen=True)
class PoolRollout:
    """One finished rollout of a pool: where it is and how it scored."""

    run: int
    task_id: str
    k: int
    model: str
    score: float

    @property
    def success(self) -> bool:
        return self.score >= 1.0 - 1e-9


def errored_rollouts(layouts: Sequence[RunLayout]) -> int:
    """Rollouts of the runs whose task setup or scorer failed: left out of every pool (an
    error, never a score), counted so the sweep can say so."""
    return sum(rollout_error(info) is not None
               for layout in layouts for headers in layout.headers().values() for info in headers.values())


def load_pools(layouts: Sequence[RunLayout]) -> tuple[dict[str, dict[str, list[PoolRollout]]], dict[str, str]]:
    """{task: {model: rollouts}} over the runs, rollouts ended by the agent only (a world
    failure, a failed setup or scorer, says nothing of a model), and each task's instruction."""
    pools: dict[str, dict[str, list[PoolRollout]]] = defaultdict(lambda: defaultdict(list))
    instructions: dict[str, str] = {}
    for i, layout in enumerate(layouts):
        for task_id, headers in layout.headers().items():
            task = layout.task(task_id).read_task()
            if task is None:
                continue
            instructions.setdefault(task_id, task.instruction)
            for k, info in sorted(headers.items()):
                if info is None or info.status not in AGENT_OUTCOMES or info.score_error is not None:
                    continue
                pools[task_id][info.model].append(PoolRollout(i, task_id, k, info.model, info.score or 0.0))
    return {t: dict(m) for t, m in pools.items()}, instructions


def _matches(pattern: str, model: str) -> bool:
    return model == pattern or model.split("/", 1)[-1] == pattern


@dataclass
class SweepPoint:
    """One (mixture, N): blind selection, minimum + gain, the mean rollout and pass@N, each
    the mean over samples and tasks, with 95% intervals."""

    mixture: str
    n: int
    tasks: int
    min_gain: float
    min_gain_ci: tuple[float, float]
    pass_at_n: float
    pass_ci: tuple[float, float]
    blind: float | None = None
    blind_ci: tuple[float, float] | None = None
    mean_rollout: float = 0.0
    judge_calls: int = 0
    per_task: dict[str, float] = field(default_factory=dict)
    """Blind selection's score per task (minimum + gain's when blind was not asked for)."""
    #: Draws whose judge failed for good: left out of the figures that needed it, never a pick.
    judge_errors: int = 0

    def row(self) -> dict[str, Any]:
        blind_lo, blind_hi = self.blind_ci if self.blind_ci is not None else (None, None)
        return {"mixture": self.mixture, "n": self.n, "tasks": self.tasks,
                "blind": self.blind, "blind_lo": blind_lo, "blind_hi": blind_hi,
                "min_gain": self.min_gain, "min_gain_lo": self.min_gain_ci[0], "min_gain_hi": self.min_gain_ci[1],
                "mean_rollout": self.mean_rollout, "pass_at_n": self.pass_at_n,
                "pass_lo": self.pass_ci[0], "pass_hi": self.pass_ci[1], "judge_calls": self.judge_calls,
                "judge_errors": self.judge_errors}


def _bootstrap(values: list[float], rng: np.random.Generator, resamples: int) -> tuple[float, float]:
    if not values:
        return (0.0, 0.0)
    data = np.asarray(values, dtype=float)
    idx = rng.integers(0, len(data), size=(resamples, len(data)))
    means = data[idx].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


class _Narrations:
    """Candidates narrated once per rollout, each from its run's fact cache."""

    def __init__(self, layouts: Sequence[RunLayout], model: ChatModel, cfgs: list[NarrativeConfig]) -> None:
        self.layouts, self.model, self.cfgs = layouts, model, cfgs
        self._builders: dict[tuple[int, str], NarrativeBuilder] = {}
        self._done: dict[tuple[int, str, int], Candidate] = {}

    async def candidate(self, r: PoolRollout) -> Candidate:
        key = (r.run, r.task_id, r.k)
        if key not in self._done:
            builder = self._builders.get((r.run, r.task_id))
            if builder is None:
                layout = self.layouts[r.run]
                builder = self._builders[(r.run, r.task_id)] = NarrativeBuilder(
                    self.model, fact_cache(layout), self.cfgs[r.run])
            self._done[key] = await narrate_rollout(builder, self.layouts[r.run].rollout(r.task_id, r.k))
        return self._done[key]


async def sweep(layouts: Sequence[RunLayout], mixtures: list[MixtureSpec], ns: list[int] | None, *,
                model: ChatModel, judge: str = "mcq", samples: int = 5, seed: int = 0,
                narrative_cfgs: list[NarrativeConfig] | None = None, judge_cfg: JudgeConfig | None = None,
                resamples: int = 1000, oracle_only: bool = False) -> list[SweepPoint]:
    """Evaluate every mixture at every N (None: each mixture at its own total)."""
    pools, instructions = load_pools(layouts)
    if not pools:
        raise SweepError("the run folders hold no finished rollout: pass folders of `agent-s3 bench` runs")
    models = sorted({m for per in pools.values() for m in per})
    for mixture in mixtures:
        for pattern, _ in mixture.parts:
            if not any(_matches(pattern, m) for m in models):
                raise SweepError(f"no rollout of {pattern!r} in the runs; their models are: {', '.join(models)}")
    narrations = _Narrations(layouts, model, narrative_cfgs or [NarrativeConfig()] * len(layouts))
    judged: dict[tuple[tuple[int, str, int], ...], int | None] = {}
    rng_ci = np.random.default_rng(seed)
    points: list[SweepPoint] = []
    for mixture in mixtures:
        for n in ns or [mixture.total]:
            counts = scaled_counts(mixture, n)
            calls_before = len(judged)
            failed = 0
            filtered: dict[str, list[float]] = defaultdict(list)
            blind: dict[str, list[float]] = defaultdict(list)
            passed: dict[str, list[float]] = defaultdict(list)
            means: dict[str, list[float]] = defaultdict(list)
            for s in range(samples):
                rng = random.Random(f"{seed}:{mixture.label}:{n}:{s}")
                for task_id in sorted(pools):
                    subset = _draw(pools[task_id], mixture, counts, rng)
                    if subset is None:
                        continue
                    scores = [r.score for r in subset]
                    passed[task_id].append(float(any(r.success for r in subset)))
                    means[task_id].append(sum(scores) / len(scores))
                    agree = len(set(scores)) == 1
                    if agree:
                        filtered[task_id].append(scores[0])  # counted without a judge
                        if oracle_only:
                            continue
                        if scores[0] == 0 or len(subset) == 1:  # every outcome is this score
                            blind[task_id].append(scores[0])
                            continue
                    key = tuple((r.run, r.task_id, r.k) for r in subset)
                    if key not in judged:
                        judged[key] = await _judge(narrations, model, judge, judge_cfg, instructions[task_id],
                                                   subset, seed + s)
                    pick = judged[key]
                    if pick is None:
                        failed += 1
                        continue
                    blind[task_id].append(subset[pick].score)
                    if not agree:
                        filtered[task_id].append(subset[pick].score)
            per_filtered = {t: sum(v) / len(v) for t, v in filtered.items()}
            per_blind = {t: sum(v) / len(v) for t, v in blind.items()}
            per_pass = [sum(v) / len(v) for v in passed.values()]
            per_mean = [sum(v) / len(v) for v in means.values()]
            points.append(SweepPoint(
                mixture=mixture.label, n=n, tasks=len(per_filtered),
                min_gain=float(np.mean(list(per_filtered.values()))) if per_filtered else 0.0,
                min_gain_ci=_bootstrap(list(per_filtered.values()), rng_ci, resamples),
                pass_at_n=float(np.mean(per_pass)) if per_pass else 0.0,
                pass_ci=_bootstrap(per_pass, rng_ci, resamples),
                blind=None if oracle_only else (float(np.mean(list(per_blind.values()))) if per_blind else 0.0),
                blind_ci=None if oracle_only else _bootstrap(list(per_blind.values()), rng_ci, resamples),
                mean_rollout=float(np.mean(per_mean)) if per_mean else 0.0,
                judge_calls=len(judged) - calls_before, per_task=per_filtered if oracle_only else per_blind,
                judge_errors=failed))
    return points


def _draw(pool: dict[str, list[PoolRollout]], mixture: MixtureSpec, counts: list[int],
          rng: random.Random) -> list[PoolRollout] | None:
    """A subset of `counts[i]` rollouts of each part's model (None: the pool is too small)."""
    subset: list[PoolRollout] = []
    for (pattern, _), count in zip(mixture.parts, counts, strict=True):
        found = [r for m, rs in sorted(pool.items()) if _matches(pattern, m) for r in rs]
        if len(found) < count:
            return None
        subset += rng.sample(found, count)
    return subset


async def _judge(narrations: _Narrations, model: ChatModel, judge: str, cfg: JudgeConfig | None,
                 instruction: str, subset: list[PoolRollout], seed: int) -> int | None:
    """Position in `subset` of the judge's pick; None when the judge failed (an error, never
    a pick), and 0 when it deliberately picked none."""
    shown = []
    for i, r in enumerate(subset):
        c = await narrations.candidate(r)
        shown.append(Candidate(rollout=i, parts=c.parts, representation=c.representation))
    base = cfg or JudgeConfig()
    selection = await make_judge(judge, model, base.model_copy(update={"seed": seed}))(instruction, shown)
    if selection.error is not None:
        return None
    return selection.chosen if selection.chosen is not None else 0
