"""A whole benchmark at the paper's scale, SIMULATED: OSWorld's 361 tasks × 10 rollouts on a
simulated fleet of 160 environments, through the real ``agent-s3 bench`` (scheduler,
executor, narration while rollouts run, the judge, the ledger, resume, the report), with
simulated models whose latencies, token counts and rate limits come from
core/llm/sim/models.yaml and a fleet whose launches, reverts and failures come from
environments/sim/fleet.yaml. The clock is virtual: simulated seconds cost no real time,
and every figure below is in simulated seconds unless it says "real".

Measured in one invocation, side by side:

- the paced run (the default: calls share one rate budget per model, judging first) and
  the same run blind (``limits.pacing=false``: each refused call retried as the provider
  asks): wall time, refused requests and the time they cost, calls held by the budget;
- the wall time against the critical path (the slowest task alone: its longest rollout,
  then its judging) and against the paper's pipeline replayed from the same run
  (rollouts, then narratives on 100 workers, then judging on 100 workers; `sim_figures`);
- environment-hours and dollars (EC2 per-second billing of t3.xlarge), model dollars per
  module, the most environments lent and model calls in flight at once, the time from each
  task's last step to its pick against its judge call;
- the driver's real CPU seconds and peak memory per 1,000 rollouts (the machine is shared:
  real seconds are not comparable between runs, CPU seconds are);
- resume: the paced command killed (SIGKILL) when half of the tasks have their result,
  then run again: tasks kept, rollouts redone, simulated time of both parts.

    python benchmarks/sim_scale.py --tasks OSWorld/evaluation_examples/test_nogdrive.json \\
        [--examples DIR] [--rollouts 10] [--fleet 160] [--limit N] [--out DIR] [--skip-blind] [--skip-resume]

(`--tasks` defaults to the task list of OSWorld's release kept under /work/shared/reference.)
Prints a table and writes ``sim_scale.json`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from sim_figures import RunFigures, paper_pipeline, read_run

AGENT = Path(sys.executable).with_name("agent-s3")
MODEL = "sim/openai/gpt-5-2025-08-07"
DEFAULT_TASKS = Path("/work/shared/reference/osworld_tasks/test_nogdrive.json")
#: What the paper reports for the real thing (Behavior Judge, appendix B): shown, never divided by.
PAPER = {"rollouts": 15 * 3600 + 54 * 60, "narratives": 79 * 60, "judging": 20 * 60, "total": 17 * 3600 + 33 * 60}


@dataclass
class Driver:
    """The real cost of one ``agent-s3 bench`` process."""

    real_seconds: float
    cpu_seconds: float
    peak_rss_mib: float
    returncode: int
    rss_growth_per_1000_rollouts_mib: float | None = None
    """Resident memory added per 1,000 rollouts finished, between the first task's result
    and the end (the start-up's imports and the first wave of rollouts left out)."""


def _command(args: argparse.Namespace, out: Path, run_id: str, *extra: str) -> list[str]:
    command = [str(AGENT), "bench", "osworld", "--tasks", str(args.tasks), "--env", "sim", "--model", MODEL,
               "--rollouts", str(args.rollouts), "--parallel", "400", "--seed", "7", "--run-id", run_id,
               "--out", str(out), "-c", f"environment.fleet={args.fleet}", "-c", "durable=false",
               "-c", "policy.max_connections=2000", "-c", "rollout.max_steps=100",
               "-c", f"environment.fleet_log={out / (run_id + '-fleet.jsonl')}", *extra]
    if args.examples:
        command += ["--examples", str(args.examples)]
    if args.limit:
        command += ["--limit", str(args.limit)]
    return command


def _rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _drive(command: list[str], log: Path, run: Path, rollouts: int, *, kill_when: Any = None) -> Driver:
    """Run `command` to its end (or SIGKILL it when `kill_when()` says so); its real cost,
    and how its resident memory grew with the tasks it finished (sampled every 2 s)."""
    began = time.perf_counter()
    samples: list[tuple[int, float]] = []
    with log.open("a") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT,
                                env={**os.environ, "COLUMNS": "160"})
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)  # reaps it with its resource usage
            if pid:
                break
            done = _results(run)
            rss = _rss_mib(proc.pid)
            if rss is not None and done:
                samples.append((done, rss))
            if kill_when is not None and kill_when():
                proc.send_signal(signal.SIGKILL)
            time.sleep(2.0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    growth = None
    if len(samples) >= 2 and samples[-1][0] > samples[0][0]:
        (d0, r0), (d1, r1) = samples[0], max(samples, key=lambda s: s[1])
        growth = (r1 - r0) / max((d1 - d0) * rollouts / 1000, 1e-9) if d1 > d0 else None
    return Driver(real_seconds=time.perf_counter() - began, cpu_seconds=usage.ru_utime + usage.ru_stime,
                  peak_rss_mib=usage.ru_maxrss / 1024, returncode=os.waitstatus_to_exitcode(status),
                  rss_growth_per_1000_rollouts_mib=growth)


def _run_or_reuse(args: argparse.Namespace, out: Path, run_id: str, *extra: str) -> Driver | None:
    """Run `run_id` (its driver's cost kept in ``<run>-driver.json``), or read both back with --reuse;
    a finished run without that record (its driver was not watched) is read without a driver's cost."""
    saved = out / f"{run_id}-driver.json"
    if args.reuse and saved.exists():
        return Driver(**json.loads(saved.read_text()))
    if args.reuse and (out / run_id / "summary.json").exists():
        print(f"{run_id}: reused without its driver's cost (no {saved.name})", flush=True)
        return None
    driver = _drive(_command(args, out, run_id, *extra), out / f"{run_id}.log", out / run_id, args.rollouts)
    saved.write_text(json.dumps(asdict(driver)))
    return driver


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:6.2f} h"


def _results(run: Path) -> int:
    return sum(1 for _ in run.glob("*/result.json"))


def _resume(args: argparse.Namespace, out: Path, tasks: int) -> dict[str, Any]:
    run = out / "resume"
    log = out / "resume.log"
    half = max(1, tasks // 2)
    first = _drive(_command(args, out, "resume"), log, run, args.rollouts, kill_when=lambda: _results(run) >= half)
    at_kill = _results(run)
    before = read_run(run)
    heads_before = {p: json.loads(p.read_text()) for p in run.glob("*/rollout-*/rollout.json")}
    finished_before = sum(1 for h in heads_before.values() if h["status"] != "running" and h.get("ended_at"))
    second = _drive(_command(args, out, "resume"), log, run, args.rollouts)
    after = read_run(run, out / "resume-fleet.jsonl")
    redone = sum(1 for p, h in heads_before.items()
                 if json.loads(p.read_text()).get("attempts", 1) > h.get("attempts", 1)
                 or json.loads(p.read_text())["started_at"] != h["started_at"])
    text = log.read_text()
    return {"results_at_kill": at_kill, "tasks_before_kill": before.tasks,
            "rollouts_finished_before_kill": finished_before, "rollouts_redone": redone,
            "kept_line": next((line for line in text.splitlines() if line.startswith("resumed")), ""),
            "first_part_wall": before.wall, "resumed_part_wall": after.fleet.get("open_to_close", 0.0),
            "final_tasks": after.tasks, "final_rollouts": after.rollouts, "killed_returncode": first.returncode,
            "resumed_returncode": second.returncode, "scores": after.scores}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=Path, default=DEFAULT_TASKS, help="an OSWorld task list (test_nogdrive.json)")
    parser.add_argument("--examples", type=Path, default=None, help="its examples folder (default: beside it)")
    parser.add_argument("--rollouts", type=int, default=10)
    parser.add_argument("--fleet", type=int, default=160)
    parser.add_argument("--limit", type=int, default=None, help="only this many tasks (a quick look)")
    parser.add_argument("--out", type=Path, default=None, help="where the runs go (default: a temporary folder)")
    parser.add_argument("--skip-blind", action="store_true")
    parser.add_argument("--skip-resume", action="store_true")
    parser.add_argument("--reuse", action="store_true",
                        help="read runs already in --out (and their <run>-driver.json) instead of running them")
    args = parser.parse_args(argv)
    if not args.tasks.exists():
        raise SystemExit(f"no task list at {args.tasks}: pass --tasks OSWorld/evaluation_examples/test_nogdrive.json")
    out = args.out or Path(tempfile.mkdtemp(prefix="sim-scale-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"SIMULATED fleet and models, virtual clock; runs in {out}", flush=True)

    paced_driver = _run_or_reuse(args, out, "paced")
    paced = read_run(out / "paced", out / "paced-fleet.jsonl")
    blind_driver, blind = None, None
    if not args.skip_blind:
        blind_driver = _run_or_reuse(args, out, "blind", "-c", "limits.pacing=false")
        blind = read_run(out / "blind", out / "blind-fleet.jsonl")
    resumed = None if args.skip_resume else _resume(args, out, paced.tasks)
    replay = paper_pipeline(paced, environments=args.fleet)
    replay_waits = paper_pipeline(paced, environments=args.fleet, harness_wait=80.0)
    report = _report(paced, paced_driver, blind, blind_driver, replay, replay_waits, resumed)
    (out / "sim_scale.json").write_text(json.dumps({
        "paced": _summary(paced, paced_driver), "blind": _summary(blind, blind_driver) if blind else None,
        "paper_pipeline_replayed": replay, "paper_pipeline_replayed_with_harness_waits": replay_waits,
        "paper_reported": PAPER, "resume": resumed}, indent=1, default=str))
    print(report)
    print(f"written: {out / 'sim_scale.json'}")
    return 0 if paced_driver is None or paced_driver.returncode == 0 else 1


def _summary(fig: RunFigures | None, driver: Driver | None) -> dict[str, Any]:
    if fig is None:
        return {}
    data = asdict(fig)
    for bulky in ("spans", "narrative_latencies", "judge_latencies", "last_step_to_pick", "judge_seconds", "scores"):
        data.pop(bulky)
    data["driver"] = asdict(driver) if driver else None
    data["last_step_to_pick_median"] = statistics.median(fig.last_step_to_pick) if fig.last_step_to_pick else None
    return data


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _report(paced: RunFigures, pd: Driver | None, blind: RunFigures | None, bd: Driver | None,
            replay: dict[str, float], replay_waits: dict[str, float], resumed: dict[str, Any] | None) -> str:
    rows: list[tuple[str, str, str]] = []

    def row(name: str, a: str, b: str = "") -> None:
        rows.append((name, a, b))

    row("SIMULATED (virtual clock)", "paced", "blind" if blind else "")
    row("tasks x rollouts", f"{paced.tasks} x {paced.rollouts // max(paced.tasks, 1)}",
        f"{blind.tasks} x {blind.rollouts // max(blind.tasks, 1)}" if blind else "")
    row("wall time (first rollout to last pick)", _hours(paced.wall), _hours(blind.wall) if blind else "")
    row("critical path (slowest task + its judging)", _hours(paced.critical_path),
        _hours(blind.critical_path) if blind else "")
    row("wall / critical path", f"{paced.wall / max(paced.critical_path, 1):.2f}",
        f"{blind.wall / max(blind.critical_path, 1):.2f}" if blind else "")
    row("rollout mean / median (paper 891 / 626 s)", f"{paced.rollout_mean:.0f} / {paced.rollout_median:.0f} s",
        f"{blind.rollout_mean:.0f} / {blind.rollout_median:.0f} s" if blind else "")
    row("requests refused by the provider (429)", f"{paced.refusals}", f"{blind.refusals}" if blind else "")
    row("time lost to refusals (sum over calls)", _hours(paced.refused_seconds),
        _hours(blind.refused_seconds) if blind else "")
    row("calls held by the rate budget / held time", f"{paced.paced_calls} / {_hours(paced.paced_seconds)}",
        f"{blind.paced_calls} / {_hours(blind.paced_seconds)}" if blind else "")
    row("model calls / failed for good", f"{paced.calls} / {paced.failed_calls}",
        f"{blind.calls} / {blind.failed_calls}" if blind else "")
    row("environment-hours / dollars (EC2)", f"{paced.fleet.get('machine_hours', 0):.0f} h / ${paced.fleet.get('dollars', 0):.0f}",
        f"{blind.fleet.get('machine_hours', 0):.0f} h / ${blind.fleet.get('dollars', 0):.0f}" if blind else "")
    row("model dollars (all modules)", f"${sum(paced.dollars.values()):.0f}",
        f"${sum(blind.dollars.values()):.0f}" if blind else "")
    row("peak environments lent / model calls in flight", f"{paced.fleet.get('peak_lent', 0)} / {paced.peak_calls}",
        f"{blind.fleet.get('peak_lent', 0)} / {blind.peak_calls}" if blind else "")
    row("launches / capacity errors / instances lost",
        f"{paced.fleet.get('launches', 0)} / {paced.fleet.get('capacity_errors', 0)} / {paced.fleet.get('losses', 0)}",
        f"{blind.fleet.get('launches', 0)} / {blind.fleet.get('capacity_errors', 0)} / {blind.fleet.get('losses', 0)}"
        if blind else "")
    def spread(values: list[float]) -> str:
        return f"{_pct(values, .5):.0f} / {_pct(values, .9):.0f} / {max(values, default=0):.0f} s"

    def ratio(fig: RunFigures) -> str:
        ratios = [a / b for a, b in zip(fig.last_step_to_pick, fig.judge_seconds, strict=True) if b > 0]
        return f"{statistics.median(ratios):.3f}" if ratios else "-"

    row("last step -> pick, median / p90 / max", spread(paced.last_step_to_pick),
        spread(blind.last_step_to_pick) if blind else "")
    row("  its judge call, median / p90 / max", spread(paced.judge_seconds), spread(blind.judge_seconds) if blind else "")
    row("  last step -> pick / judge call, median", ratio(paced), ratio(blind) if blind else "")
    def cpu(driver: Driver | None, fig: RunFigures | None) -> str:
        if driver is None or fig is None:
            return "not measured"
        return f"{driver.cpu_seconds / max(fig.rollouts / 1000, 1e-9):.0f} s"

    def growth(driver: Driver | None) -> str:
        value = driver.rss_growth_per_1000_rollouts_mib if driver else None
        return f"{value:.0f} MiB" if value is not None else "-"

    row("driver CPU per 1,000 rollouts (real)", cpu(pd, paced), cpu(bd, blind) if blind else "")
    row("driver peak memory (real)", f"{pd.peak_rss_mib:.0f} MiB" if pd else "not measured",
        f"{bd.peak_rss_mib:.0f} MiB" if bd else "")
    row("  its growth per 1,000 rollouts (real)", growth(pd), growth(bd) if bd else "")
    row("driver real time (shared machine)", f"{pd.real_seconds / 60:.1f} min" if pd else "not measured",
        f"{bd.real_seconds / 60:.1f} min" if bd else "")
    lines = [f"{a:<48}{b:>26}{c:>26}" for a, b, c in rows]
    lines += ["", "the paper's pipeline, replayed from the paced run's own durations (SIMULATED) beside what the paper reports:",
              f"{'':<30}{'replayed':>12}{'+ harness waits':>17}{'paper reported':>16}"]
    for phase in ("rollouts", "narratives", "judging", "total"):
        lines.append(f"{phase:<30}{_hours(replay[phase]):>12}{_hours(replay_waits[phase]):>17}{_hours(PAPER[phase]):>16}")
    lines.append(f"{'this runner (paced), wall':<30}{_hours(paced.wall):>12}")
    lines.append(f"{'replayed / this runner':<30}{replay['total'] / max(paced.wall, 1):>12.2f}"
                 f"{replay_waits['total'] / max(paced.wall, 1):>17.2f}")
    if resumed:
        lines += ["", "resume after the driver was killed (SIGKILL) at half of the tasks:",
                  f"  tasks with a result at the kill: {resumed['results_at_kill']} (of {resumed['final_tasks']}), "
                  f"rollouts finished: "
                  f"{resumed['rollouts_finished_before_kill']}, redone after resuming: {resumed['rollouts_redone']}",
                  f"  {resumed['kept_line']}",
                  f"  simulated time: {_hours(resumed['first_part_wall'])} before the kill + "
                  f"{_hours(resumed['resumed_part_wall'])} resumed; finally {resumed['final_tasks']} tasks, "
                  f"{resumed['final_rollouts']} rollouts, exit {resumed['resumed_returncode']}"]
    lines.append("All figures SIMULATED except those marked real; seconds are simulated seconds (virtual clock).")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
