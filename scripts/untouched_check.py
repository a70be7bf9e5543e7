"""Every task of an OSWorld examples folder set up and scored untouched on a local desktop,
beside what the support report predicted for it.

For each task: the support report's prediction (runnable here, or its refusals, with a local
desktop's answers and this machine's network setting), then the check of `agent-s3 tasks
check` (`runner.task_check.check_one`) on one local desktop: set up, scored with nobody
acting, flagged when doing nothing scores 1, or failed with its cause, plus the setup commands
that ran but exited non-zero. One JSON line per task goes to ``--out`` (a rerun skips the
tasks already there); the summary is printed at the end.

    python scripts/untouched_check.py EXAMPLES_DIR --out results.jsonl [--network] [--limit N] [--only ID...]

Long (every task's apps start): not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from environments.local import DesktopConfig, LocalDesktop, LocalEnvironment
from environments.local.probe import probe_desktop
from environments.local.server_env import server_environment
from environments.tasks import iter_task_files, load_task
from environments.tasks.support import needs, task_refusals
from runner.task_check import TaskCheck, check_one

#: No task may hold the desktop longer than this (OSWorld's own waits can last 30 minutes).
TASK_CAP_S = 300.0


async def run(args: argparse.Namespace) -> int:
    tasks = [load_task(path, domain) for domain, path in iter_task_files(args.examples)]
    if args.only:
        tasks = [t for t in tasks if any(t.id.startswith(p) for p in args.only)]
    tasks = tasks[: args.limit] if args.limit else tasks
    done = {}
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            record = json.loads(line)
            done[record["task_id"]] = record
    answers = await probe_desktop(set().union(*(needs(t) for t in tasks)))
    config = DesktopConfig(network="on" if args.network else "off")
    with tempfile.TemporaryDirectory(prefix="untouched-") as base:
        desktop = LocalDesktop("untouched", Path(base), config, pool="untouched")
        await asyncio.to_thread(desktop.start)

        async def keep(_: LocalEnvironment) -> None:
            return None

        env = LocalEnvironment(desktop, server_environment(desktop), on_close=keep)
        try:
            with args.out.open("a") as out:
                for number, task in enumerate(tasks, 1):
                    if task.id in done:
                        continue
                    refusals = task_refusals(task, installed=answers.__getitem__, network=args.network)
                    started = time.monotonic()
                    env.last_setup_warnings = []
                    try:
                        check = await asyncio.wait_for(
                            check_one(env, task, task.domain, Path(base) / "cache" / task.id), TASK_CAP_S
                        )
                    except TimeoutError:
                        check = TaskCheck(task.id, task.domain, "setup_failed",
                                          reason=f"task {task.id}: the check took over {TASK_CAP_S:g} s")
                    if desktop.problem() is not None:  # a task that killed its desktop: start afresh
                        await asyncio.to_thread(desktop.close)
                        await asyncio.to_thread(desktop.start)
                    record = check.to_json() | {
                        "predicted": "runnable" if not refusals else "refused",
                        "refusals": [r.key for r in refusals],
                        "setup_warnings": list(env.last_setup_warnings),
                        "wall_seconds": round(time.monotonic() - started, 1),
                    }
                    done[task.id] = record
                    out.write(json.dumps(record) + "\n")
                    out.flush()
                    note = check.reason or "; ".join(env.last_setup_warnings)
                    print(f"[{number}/{len(tasks)}] {task.domain} {task.id[:8]} {record['predicted']:<8} "
                          f"{check.outcome:<15} score={check.score} {note[:140]}", flush=True)
        finally:
            await env.close()
            await asyncio.to_thread(desktop.close)
    summarize([done[t.id] for t in tasks if t.id in done])
    return 0


def _cause(record: dict) -> str:
    """A failure's cause without the task's own name (so like causes count together)."""
    reason = str(record.get("reason") or "")
    return reason.split(": ", 1)[1] if reason.startswith("task ") and ": " in reason else reason


def summarize(records: list[dict]) -> None:
    """Outcomes beside the prediction, and every cause of failure among predicted-runnable tasks."""
    table: Counter[tuple[str, str]] = Counter()
    for r in records:
        outcome = {"ok": "scored", "flagged": "scored, flagged (1 untouched)"}.get(r["outcome"], r["outcome"])
        table[(r["predicted"], outcome)] += 1
    print(f"\ntasks {len(records)}")
    for (predicted, outcome), count in sorted(table.items()):
        print(f"  predicted {predicted:<9} -> {outcome:<32} {count:>4}")
    scored = ("ok", "flagged")
    causes = Counter(
        _cause(r)[:120] for r in records if r["predicted"] == "runnable" and r["outcome"] not in scored
    )
    if causes:
        print("failures of tasks predicted runnable:")
        for cause, count in causes.most_common():
            print(f"  {count:>4}  {cause}")
    warned = [r for r in records if r["outcome"] in scored and r.get("setup_warnings")]
    if warned:
        print(f"scored although a setup command exited non-zero: {len(warned)}")
        for r in warned:
            print(f"  {r['domain']} {r['task_id'][:8]} score={r['score']}: {r['setup_warnings'][0][:140]}")
    refused = Counter(_cause(r)[:90] for r in records if r["predicted"] == "refused" and r["outcome"] not in scored)
    print("causes among tasks predicted refused (top 15):")
    for cause, count in refused.most_common(15):
        print(f"  {count:>4}  {cause}")


async def _repredict(records: list[dict], args: argparse.Namespace) -> None:
    """The support report's prediction as the current code makes it (a desktop asked again)."""
    tasks = {t.id: t for t in (load_task(path, domain) for domain, path in iter_task_files(args.examples))}
    answers = await probe_desktop(set().union(*(needs(t) for t in tasks.values())))
    for record in records:
        refusals = task_refusals(tasks[record["task_id"]], installed=answers.__getitem__, network=args.network)
        record["predicted"] = "runnable" if not refusals else "refused"
        record["refusals"] = [r.key for r in refusals]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--network", action="store_true", help="give tasks that need it the internet")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--only", nargs="*", default=[], help="task id prefixes")
    parser.add_argument("--summary", action="store_true", help="only print the summary of --out")
    args = parser.parse_args(argv)
    if args.summary:
        records = [json.loads(line) for line in args.out.read_text().splitlines()]
        asyncio.run(_repredict(records, args))
        summarize(records)
        return 0
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
