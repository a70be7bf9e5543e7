"""What confining OSWorld's metrics costs: one scoring's metric time in the confined worker
beside the same metric called in this process, in the same run.

For a few metrics of the pinned desktop-env, on small files in a cache folder: the cold
in-process call (its module imported first, as the first scoring of a run pays) and the warm
one, against the confined worker: start to ready (bubblewrap, an unprivileged uid, loading the
metric's module; in a scoring this overlaps the getters' fetching) and the call itself.

    python benchmarks/confined_scoring.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from environments.tasks.metric_sandbox import MetricSandbox

_IN_PROCESS = """
import json, sys, time
t0 = time.perf_counter()
from environments.tasks.official import metric
fn = metric(sys.argv[1]).fn
t1 = time.perf_counter()
args = json.loads(sys.argv[2])
fn(*args)
t2 = time.perf_counter()
fn(*args)
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def _cases(cache: Path) -> dict[str, tuple[object, ...]]:
    (cache / "a.txt").write_text("same\n")
    (cache / "b.txt").write_text("same\n")
    import sqlite3

    with sqlite3.connect(cache / "r.db") as db:
        db.execute("CREATE TABLE t (n INTEGER)")
    return {
        "exact_match": ("same", {"expected": "same"}),
        "compare_text_file": (str(cache / "a.txt"), str(cache / "b.txt")),
        "run_sqlite3": (str(cache / "r.db"), {"sql": "SELECT count(*) = 0 FROM t"}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{'metric':20} {'import+cold ms':>15} {'warm ms':>9} {'confined ready ms':>18} {'confined call ms':>17}")
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "cache"
        cache.mkdir()
        for name, call in _cases(cache).items():
            cold, warm, ready, confined = [], [], [], []
            for _ in range(args.rounds):
                done = subprocess.run([sys.executable, "-c", _IN_PROCESS, name, json.dumps(call)],
                                      capture_output=True, text=True, check=True)  # fmt: skip
                imported, first, second = (float(x) for x in done.stdout.splitlines()[-1].split())
                cold.append(imported + first)
                warm.append(second)
                started = time.perf_counter()
                with MetricSandbox(cache) as sandbox:
                    sandbox.start([name])
                    sandbox.call(name, call, {})  # waits for the preload first
                    t1 = time.perf_counter()
                    sandbox.call(name, call, {})
                    t2 = time.perf_counter()
                ready.append(t1 - started)
                confined.append(t2 - t1)
            med = statistics.median
            print(f"{name:20} {med(cold) * 1e3:15.0f} {med(warm) * 1e3:9.1f} {med(ready) * 1e3:18.0f} "
                  f"{med(confined) * 1e3:17.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
