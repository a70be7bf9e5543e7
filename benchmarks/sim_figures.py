"""Figures of a simulated benchmark run, read from its folder (for `sim_scale.py`).

Everything is in simulated seconds, read from what the run wrote: rollout headers
(start, end), each task's selection, the ledger (every model call: module, task, start,
seconds, tokens, dollars, time held by the rate budget, refusals and the time they cost)
and the simulated fleet's log (machine-seconds, dollars, launches, the most environments
lent at once).

`paper_pipeline` replays the same run's measured durations the way Behavior Judge's
appendix ran them: every rollout first (on the same fleet, tasks in order), then every
narrative call on 100 workers, then every judge call on 100 workers; calls are laid out
by their own latency (the time the live run held them for its rate budget is left out).
"""

from __future__ import annotations

import heapq
import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RunFigures", "paper_pipeline", "read_run"]


@dataclass
class RunFigures:
    """What one simulated run did, in simulated seconds."""

    tasks: int = 0
    rollouts: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    wall: float = 0.0
    """First rollout start to the last pick (or the last rollout's end)."""
    critical_path: float = 0.0
    """The slowest task alone: its longest rollout, then its judging."""
    rollout_mean: float = 0.0
    rollout_median: float = 0.0
    last_step_to_pick: list[float] = field(default_factory=list)
    judge_seconds: list[float] = field(default_factory=list)
    calls: int = 0
    refusals: int = 0
    refused_seconds: float = 0.0
    paced_calls: int = 0
    paced_seconds: float = 0.0
    failed_calls: int = 0
    peak_calls: int = 0
    peak_rollouts: int = 0
    dollars: dict[str, float] = field(default_factory=dict)
    fleet: dict[str, Any] = field(default_factory=dict)
    spans: list[tuple[float, float, str]] = field(default_factory=list)
    """(start, end, task) of every rollout, for the replay."""
    narrative_latencies: list[float] = field(default_factory=list)
    judge_latencies: list[float] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)


def _peak(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    best = now = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def read_run(run: Path, fleet_log: Path | None = None) -> RunFigures:
    """The figures of the run folder `run` (and of its fleet's log, when given)."""
    out = RunFigures()
    ledger_calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
    intervals: list[tuple[float, float]] = []
    with (run / "ledger.jsonl").open() as lines:
        for line in lines:
            r = json.loads(line)
            out.calls += 1
            start, seconds = float(r["started_at"]), float(r["seconds"])
            intervals.append((start, start + seconds))
            out.dollars[r["module"]] = out.dollars.get(r["module"], 0.0) + float(r.get("dollars", 0.0))
            out.refusals += int(r.get("refusals", 0))
            out.refused_seconds += float(r.get("refused_seconds", 0.0))
            held = float(r.get("paced_seconds", 0.0))
            out.paced_calls += held > 0
            out.paced_seconds += held
            out.failed_calls += r.get("error") is not None
            latency = max(seconds - held - float(r.get("refused_seconds", 0.0)), 0.0)
            if r["module"] == "narrative":
                out.narrative_latencies.append(latency)
            elif r["module"] == "judge":
                out.judge_latencies.append(latency)
                ledger_calls[r["tags"].get("task", "")].append(r)
    out.peak_calls = _peak(intervals)
    picks: list[float] = []
    first = float("inf")
    rollout_intervals: list[tuple[float, float]] = []
    critical: list[float] = []
    for task_dir in sorted(p for p in run.iterdir() if p.is_dir() and (p / "task.json").exists()):
        heads = [json.loads(h.read_text()) for h in sorted(task_dir.glob("rollout-*/rollout.json"))]
        if not heads:
            continue
        out.tasks += 1
        ends = []
        longest = 0.0
        for h in heads:
            out.rollouts += 1
            out.statuses[h["status"]] = out.statuses.get(h["status"], 0) + 1
            if h.get("ended_at") is None:
                continue
            start, end = float(h["started_at"]), float(h["ended_at"])
            first = min(first, start)
            ends.append(end)
            longest = max(longest, end - start)
            rollout_intervals.append((start, end))
            out.spans.append((start, end, task_dir.name))
        judges = ledger_calls.get(task_dir.name, [])
        judged = sum(float(j["seconds"]) for j in judges)
        critical.append(longest + judged)
        if judges and ends:
            pick = max(float(j["started_at"]) + float(j["seconds"]) for j in judges)
            picks.append(pick)
            out.last_step_to_pick.append(pick - max(ends))
            out.judge_seconds.append(judged)
        elif ends:
            picks.append(max(ends))
        result = task_dir / "result.json"
        if result.exists():
            data = json.loads(result.read_text())
            out.scores[task_dir.name] = float(data.get("selected_score") or 0.0)
    spans = [e - s for s, e, _ in out.spans]
    out.rollout_mean = statistics.fmean(spans) if spans else 0.0
    out.rollout_median = statistics.median(spans) if spans else 0.0
    out.peak_rollouts = _peak(rollout_intervals)
    out.wall = (max(picks) - first) if picks else 0.0
    out.critical_path = max(critical, default=0.0)
    if fleet_log is not None and fleet_log.exists():
        entries = [json.loads(line) for line in fleet_log.read_text().splitlines() if line.strip()]
        if entries:
            out.fleet = {"machine_hours": sum(e["machine_seconds"] for e in entries) / 3600,
                         "dollars": sum(e["dollars"] for e in entries),
                         "launches": sum(e["launches"] for e in entries),
                         "capacity_errors": sum(e["capacity_errors"] for e in entries),
                         "losses": sum(e["losses"] for e in entries),
                         "peak_lent": max(e["peak_lent"] for e in entries),
                         "size": max(e["size"] for e in entries),
                         "open_to_close": sum(e["closed_at"] - e["opened_at"] for e in entries)}
    return out


def _makespan(durations: list[float], workers: int) -> float:
    """List scheduling in the given order on `workers` (each job to the first free worker)."""
    free = [0.0] * max(workers, 1)
    heapq.heapify(free)
    end = 0.0
    for d in durations:
        start = heapq.heappop(free)
        heapq.heappush(free, start + d)
        end = max(end, start + d)
    return end


def paper_pipeline(fig: RunFigures, *, environments: int, workers: int = 100,
                   harness_wait: float = 0.0) -> dict[str, float]:
    """The run's measured durations replayed as the paper ran them (see the module's docstring):
    rollouts in task order on `environments`, each `harness_wait` longer (OSWorld's harness
    sleeps 60 s after a reset and 20 s before scoring), then narratives and judging on
    `workers` each."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for start, end, task in fig.spans:
        by_task[task].append(end - start + harness_wait)
    rollouts = _makespan([d for task in sorted(by_task) for d in by_task[task]], environments)
    narratives = _makespan(fig.narrative_latencies, workers)
    judging = _makespan(fig.judge_latencies, workers)
    return {"rollouts": rollouts, "narratives": narratives, "judging": judging,
            "total": rollouts + narratives + judging}
