"""OSWorld's own task files through the loader: how many load, how long it takes, and
whether each, written as a run folder's task.json and read back, exports as the file it was.

A task file is validated once, at load, into `core.trajectory.Task`; set-up and scoring read
its typed fields. This prints the load time (best of `--repeat`, and the first, cold one)
and the task.json round trip's time beside it, so both are measured in the same run.

    python benchmarks/task_load.py [--tasks /path/to/osworld_tasks] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from core.trajectory import Task
from environments.tasks import iter_task_files, load_task, load_task_list

_DEFAULT = Path(os.environ.get("AGENT_S3_OSWORLD_TASKS", "/work/shared/reference/osworld_tasks"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=Path, default=_DEFAULT, help="OSWorld's evaluation_examples folder")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    runs = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        tasks = load_task_list(args.tasks / "test_all.json", args.tasks / "examples")
        runs.append(time.perf_counter() - started)
    windows = [load_task(path, domain) for domain, path in iter_task_files(args.tasks / "examples_windows")]
    print(f"test_all.json: {len(tasks)} tasks loaded in {min(runs) * 1000:.0f} ms (best of {args.repeat}; "
          f"first {runs[0] * 1000:.0f} ms), {min(runs) / len(tasks) * 1e6:.0f} us a task")
    print(f"examples_windows: {len(windows)} tasks loaded")
    started = time.perf_counter()
    differ = []
    for task in [*tasks, *windows]:
        back = Task.model_validate_json(task.model_dump_json())  # a run folder's task.json
        if task.source_path is None or back.to_osworld() != json.loads(Path(task.source_path).read_text()):
            differ.append(task.id)
    took = time.perf_counter() - started
    total = len(tasks) + len(windows)
    print(f"task.json round trip: {total - len(differ)} of {total} export as read, in {took * 1000:.0f} ms"
          + (f"; differ: {', '.join(differ[:5])}" if differ else ""))


if __name__ == "__main__":
    main()
