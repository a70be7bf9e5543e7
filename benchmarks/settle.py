"""Settling by the screen against the clock, on real local desktops, over the local suite.

Every task of the local suite is set up on a real desktop (Xvfb, its applications, the
controller server) and solved by its scripted solution (tests/environments/tasks/
tasks_suite_solutions.py: keys, typing, clicks, as an agent's actions reach the desktop).
After each action the screen is recorded: a screenshot every `--poll` seconds from the
moment the action returned until 0.3 s past the fixed settle (3 s). From one recording,
for each ``settle: auto`` setting (quiet window, pixel tolerance; runner/settle.py's rule
on the same frames), the benchmark tells when auto would have stopped and which frame it
would have returned, and compares that frame with the one the fixed 3 s wait returns (the
first frame at 3 s or later). A frame at 3.3 s against the 3 s one is the noise floor (a
screen that changes on its own: a blinking caret, a clock).

Printed per setting: steps, seconds saved per step (mean, median), the share of steps
whose auto screenshot equals the 3 s one exactly (and within the tolerance), and the
decision the issue asks for: ``auto`` becomes the default only if it equals the 3 s
screenshot in at least 99 % of steps.

    python benchmarks/settle.py [--repeat 3] [--poll 0.1] [--task ID ...] [--osworld]

``--osworld`` adds OSWorld's own tasks in Chrome, VLC and GIMP (the apps whose screens the
local suite does not show: a browser loading pages, a media player, an image editor with
docks), set up from OSWorld's task files (`reference_data.OSWORLD_TASKS`) and driven by a
fixed sequence of ordinary actions per app (`OSWORLD_ACTIONS`: menus, dialogs, the address
bar, clicks). These actions do not solve the tasks; settling is about what the screen does
after an action, not about the score.

Needs root (desktops are confinements) and the desktop packages (scripts/setup.sh).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "environments" / "tasks"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from tasks_suite_solutions import SOLUTIONS, Chords, Click, Goto, Key, Pause, Step, Type, Until

from core.protocols import Environment
from core.trajectory import Task
from environments.local.kind import LocalSettings
from environments.tasks import load_suite, load_task
from runner.environments import open_pool
from runner.settle import changed_pixels

FIXED = 3.0
DECISION_SHARE = 0.99
#: (quiet window in seconds, pixel tolerance) of the settings compared; the first is runner/settle.py's default.
SETTINGS = [(1.0, 0), (0.5, 0), (0.3, 0), (1.0, 50), (0.5, 50)]

#: Ordinary actions per app for ``--osworld`` (a 1920x1080 screen).
_CHROME: list[Step] = [Key("ctrl+l"), Type("chrome://settings"), Key("enter"), Key("ctrl+t"), Type("natural products"),
                       Key("escape"), Key("ctrl+w"), Click(960, 540), Key("pagedown"), Key("ctrl+shift+b")]
_VLC: list[Step] = [Key("ctrl+p"), Key("escape"), Key("alt+m"), Key("escape"), Key("alt+t"), Key("escape"),
                    Click(960, 540), Key("ctrl+h"), Key("ctrl+h")]
_GIMP: list[Step] = [Click(960, 600), Key("tab"), Key("tab"), Key("ctrl+n"), Key("escape"), Key("alt+e"), Key("escape"),
                     Key("ctrl+comma")]
#: (domain, task id prefix, actions): tasks that set up offline here (scripts/untouched_check.py).
OSWORLD_ACTIONS: list[tuple[str, str, list[Step]]] = [
    ("chrome", "0d8b7de3", _CHROME), ("chrome", "12086550", _CHROME), ("chrome", "121ba48f", _CHROME),
    ("vlc", "8ba5ae7a", _VLC), ("vlc", "215dfd39", _VLC), ("vlc", "9195653c", _VLC),
    ("gimp", "7b7617bd", _GIMP), ("gimp", "d52d6308", _GIMP),
]


@dataclass
class Recording:
    task: str
    step: int
    action: str
    frames: list[tuple[float, bytes]] = field(default_factory=list)
    before: bytes = b""
    """The screen just before the action: whether the action showed at all."""


async def record(env: Environment, poll: float) -> list[tuple[float, bytes]]:
    """Screenshots from now until 0.3 s past the fixed settle, each with its time."""
    start = time.perf_counter()
    frames = [(0.0, await env.screenshot())]
    while frames[-1][0] < FIXED + 0.3:
        await asyncio.sleep(max(poll - (time.perf_counter() - start - frames[-1][0]), 0.0))
        frames.append((time.perf_counter() - start, await env.screenshot()))
    return frames


async def _until(env: Environment, step: Until) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    sandbox = env.sandbox()
    assert sandbox is not None
    retried = step.retry_key is None
    while True:
        result = await sandbox.run("bash", step.shell, timeout=10)
        if result.returncode == 0:
            return
        elapsed = loop.time() - start
        if not retried and elapsed > step.timeout / 2:
            retried = True
            await env.act(Key(step.retry_key).pyautogui())
        if elapsed > step.timeout:
            return  # the measurement goes on; the task's score is not this benchmark's concern
        await asyncio.sleep(0.2)


def osworld_task(domain: str, prefix: str) -> Task:
    """One of OSWorld's own task files, by domain and id prefix."""
    from reference_data import OSWORLD_TASKS  # tests/: where OSWorld's task files are found

    path = next((OSWORLD_TASKS / "examples" / domain).glob(f"{prefix}*.json"))
    return load_task(path, domain)


async def run_task(env: Environment, task: Task, steps: list[Step], poll: float, out: list[Recording],
                   cache: Path) -> None:
    task_id = task.id if task.source_path is None else f"{Path(task.source_path).parent.name}/{task.id[:8]}"
    await env.prepare_task(task, cache)
    await asyncio.sleep(2.0)  # the task's first screen, as an agent's first observation waits for it
    for index, step in enumerate(steps):
        if isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
        elif isinstance(step, Until):
            await _until(env, step)
        elif isinstance(step, Key | Goto | Chords | Type | Click):
            before = await env.screenshot()
            result = await env.act(step.pyautogui())
            if not result.ok:
                raise SystemExit(f"{task_id} step {index}: the action failed: {result}")
            out.append(Recording(task_id, index, type(step).__name__, await record(env, poll), before))


@dataclass
class Outcome:
    stop: float
    equal: bool
    within: bool
    quiet: bool


def judge(rec: Recording, quiet: float, tolerance: int) -> Outcome:
    """Where ``auto`` with these settings stops on this recording, and whether its frame is the fixed one."""
    frames = rec.frames
    fixed = next(png for t, png in frames if t >= FIXED)
    still_since = frames[0][0]
    chosen, stop, was_quiet = frames[-1][1], FIXED, False
    for (_, before), (t, png) in itertools.pairwise(frames):
        if changed_pixels(before, png) > tolerance:
            still_since = t
        if t - still_since >= quiet:
            chosen, stop, was_quiet = png, t, True
            break
        if t >= FIXED:
            chosen, stop = png, t
            break
    moved = changed_pixels(chosen, fixed)
    return Outcome(stop=min(stop, FIXED), equal=moved == 0, within=moved <= tolerance, quiet=was_quiet)


def noise_floor(rec: Recording) -> bool:
    """Whether the screen held still between 3 s and the last frame (about 3.3 s)."""
    fixed = next(png for t, png in rec.frames if t >= FIXED)
    return changed_pixels(fixed, rec.frames[-1][1]) == 0


async def measure(task_ids: list[str], repeat: int, poll: float, osworld: bool = False) -> list[Recording]:
    suite = {t.id: t for t in load_suite()}
    runs: list[tuple[Task, list[Step]]] = [(suite[t], SOLUTIONS[t]) for t in task_ids]
    if osworld:
        runs += [(osworld_task(domain, prefix), steps) for domain, prefix, steps in OSWORLD_ACTIONS]
    recordings: list[Recording] = []
    settings = LocalSettings(spare=False)
    with tempfile.TemporaryDirectory(prefix="settle-") as folder:
        async with open_pool(settings, size=1) as pool:
            env = await pool.acquire()
            try:
                for round_ in range(repeat):
                    for index, (task, steps) in enumerate(runs):
                        print(f"round {round_ + 1}/{repeat}: {task.id}", flush=True)
                        await run_task(env, task, steps, poll, recordings, Path(folder) / f"{index}-{round_}")
            finally:
                pool.release(env)
    return recordings


def report(recordings: list[Recording]) -> dict[str, object]:
    floor = sum(noise_floor(r) for r in recordings) / max(len(recordings), 1)
    settings: list[dict[str, Any]] = []
    rows: dict[str, object] = {"steps": len(recordings), "noise_floor_still": floor, "settings": settings}
    print(f"\nsteps recorded: {len(recordings)} over {len({r.task for r in recordings})} tasks; screen still "
          f"from 3.0 s to 3.3 s in {100 * floor:.1f} % of them (the noise floor)")
    print(f"{'quiet s':>8}{'tolerance px':>14}{'saved mean s':>14}{'saved median s':>16}{'stopped quiet %':>17}"
          f"{'equal %':>10}{'within tol. %':>15}")
    for quiet, tolerance in SETTINGS:
        outs = [judge(r, quiet, tolerance) for r in recordings]
        saved = [FIXED - o.stop for o in outs]
        equal = sum(o.equal for o in outs) / len(outs)
        within = sum(o.within for o in outs) / len(outs)
        stopped = sum(o.quiet for o in outs) / len(outs)
        print(f"{quiet:>8.1f}{tolerance:>14}{statistics.fmean(saved):>14.2f}{statistics.median(saved):>16.2f}"
              f"{100 * stopped:>17.1f}{100 * equal:>10.1f}{100 * within:>15.1f}")
        misses = [f"{r.task}#{r.step} {r.action}" for r, o in zip(recordings, outs, strict=True) if not o.equal]
        settings.append({"quiet": quiet, "tolerance": tolerance, "saved_mean": statistics.fmean(saved),
                                 "saved_median": statistics.median(saved), "equal": equal, "within": within,
                                 "stopped_quiet": stopped, "unequal_steps": misses})
    quiet, tolerance = SETTINGS[0]
    groups: dict[str, list[Recording]] = {}
    for r in recordings:
        groups.setdefault(r.task.split("/")[0] if "/" in r.task else "local suite", []).append(r)
    print(f"\nper app at quiet {quiet} s, tolerance {tolerance} px:")
    for name, recs in groups.items():
        outs = [judge(r, quiet, tolerance) for r in recs]
        moved = sum(changed_pixels(r.before, r.frames[-1][1]) > 0 for r in recs)
        print(f"  {name:<12} steps {len(recs):>4}  saved mean {statistics.fmean(FIXED - o.stop for o in outs):.2f} s  "
              f"equal {100 * sum(o.equal for o in outs) / len(outs):.1f} %  "
              f"screen changed after the action {100 * moved / len(recs):.0f} %")
    default = settings[0]
    verdict = "auto may become the default" if default["equal"] >= DECISION_SHARE else \
        "auto stays an opt-in preset (rollout.settle: auto); the default stays the fixed 3 s"
    print(f"\ndecision (runner/settle.py's default: quiet {SETTINGS[0][0]} s, tolerance {SETTINGS[0][1]} px): "
          f"equal in {100 * default['equal']:.1f} % of steps against the {100 * DECISION_SHARE:.0f} % bar: {verdict}; "
          f"it saves {default['saved_mean']:.2f} s per step on average")
    rows["decision"] = verdict
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="times each task is run")
    parser.add_argument("--poll", type=float, default=0.1, help="seconds between screenshots")
    parser.add_argument("--task", action="append", default=None, help="only this suite task (repeatable)")
    parser.add_argument("--osworld", action="store_true",
                        help="also OSWorld's own Chrome, VLC and GIMP tasks with ordinary actions (OSWORLD_ACTIONS)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    task_ids = args.task or [t for t in SOLUTIONS if any(s.id == t for s in load_suite())]
    recordings = asyncio.run(measure(task_ids, args.repeat, args.poll, args.osworld))
    rows = report(recordings)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
