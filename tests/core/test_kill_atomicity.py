"""SIGKILL a real writer process part-way through thousands of writes; every file it leaves
must parse whole (or be absent) and every log must hold only complete records."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.atomic import append_line, count_lines, read_jsonl, repair_jsonl_tail
from core.trajectory import RunLayout

# Writes files of 10 B .. 200 kB over a few names and appends lines of the same sizes, so a
# kill often lands inside a multi-page write. Prints each finished operation's number.
FILES_AND_LOGS = r"""
import json, random, sys
from pathlib import Path
from typing import Any
from core.atomic import append_line, write_json_atomic
folder, durable = Path(sys.argv[1]), sys.argv[2] == "1"
rng = random.Random(int(sys.argv[3]))
for i in range(1_000_000):
    size = rng.choice([10, 100, 1_000, 20_000, 200_000])
    write_json_atomic(folder / f"rec-{i % 7}.json", {"i": i, "size": size, "pad": "x" * size}, durable=durable)
    append_line(folder / "log.jsonl", json.dumps({"i": i, "size": size, "pad": "y" * size}), durable=durable)
    print(i, flush=True)
"""

# Appends steps with two screenshots each; the thought holds the screenshots' hashes.
ROLLOUT = r"""
import hashlib, os, sys, time
from core.trajectory import RolloutInfo, RunLayout, Step
layout = RunLayout(sys.argv[1], sys.argv[2])
rd = layout.rollout("task-a", 0)
rd.start(RolloutInfo(run_id=sys.argv[2], task_id="task-a", rollout=0, model="m/x", started_at=time.time()))
for i in range(1_000_000):
    shots = {"before": os.urandom(40_000), "after": os.urandom(90_000)}
    digest = ",".join(hashlib.sha256(shots[r]).hexdigest() for r in ("before", "after"))
    rd.append_step(Step(index=i, thought=digest + " " + "t" * 30_000), screenshots=shots)
    if i % 5 == 0:
        rd.write_info(rd.read_info().model_copy(update={"step_count": i + 1}))
    print(i, flush=True)
"""


def _run_until(code: str, args: list[str], operations: int) -> int:
    """Start a writer, SIGKILL it once it has finished `operations`; return how many it had."""
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    done = -1
    try:
        for line in proc.stdout:
            done = int(line)
            if done + 1 >= operations:
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert done + 1 >= operations, "the writer died before it was killed"
    return done + 1


@pytest.mark.parametrize(
    ("durable", "operations", "seed"), [(False, 1000, 1), (False, 1500, 2), (True, 150, 3)]
)
def test_killed_writer_leaves_whole_files_and_complete_lines(
    tmp_path: Path, durable: bool, operations: int, seed: int
) -> None:
    finished = _run_until(FILES_AND_LOGS, [str(tmp_path), "1" if durable else "0", str(seed)], operations)

    for path in tmp_path.iterdir():
        if path.name.startswith("."):
            continue  # a temporary the kill interrupted; never read under a real name
        if path.suffix == ".json":
            record = json.loads(path.read_bytes())
            assert len(record["pad"]) == record["size"]
    records = list(read_jsonl(tmp_path / "log.jsonl"))
    # Every acknowledged line is there, in order, whole; at most one more landed after.
    assert [r["i"] for r in records] == list(range(len(records)))
    assert finished <= len(records) <= finished + 2
    assert all(len(r["pad"]) == r["size"] for r in records)


def test_killed_rollout_never_names_a_missing_or_partial_screenshot(tmp_path: Path, make: Any) -> None:
    finished = _run_until(ROLLOUT, [str(tmp_path), "run-k"], 60)

    layout = RunLayout(tmp_path, "run-k")
    rd = layout.rollout("task-a", 0)
    info = rd.read_info()
    assert info is not None and info.status == "running"
    steps = list(rd.iter_steps())
    assert finished <= len(steps) <= finished + 2
    for step in steps:
        digests = step.thought.split(" ")[0].split(",")
        for role, digest in zip(("before", "after"), digests, strict=True):
            data = rd.read_screenshot(step, role)
            assert data is not None and hashlib.sha256(data).hexdigest() == digest

    # A new writer repairs a torn tail and carries on at the right index.
    again = layout.rollout("task-a", 0)
    stored = again.append_step(make.step(len(steps)))
    assert again.read_step(stored.index) == stored
    assert count_lines(rd.traj_path) == len(steps) + 1
    assert [s.index for s in rd.iter_steps()] == list(range(len(steps) + 1))


BIG_LINE = r"""
import sys
from core.atomic import append_line
log = sys.argv[1] + "/log.jsonl"
append_line(log, '{"i": 0}', durable=False)
line = ('{"i": 1, "pad": "' + "z" * 64_000_000 + '"}').encode()
print("writing", flush=True)
append_line(log, line, durable=False)
print("written", flush=True)
"""


def test_kill_inside_one_large_write_tears_at_most_the_last_line(tmp_path: Path) -> None:
    """The kernel stops a large write part-way on SIGKILL (seen here: 16-32 kB of 64 MB
    landed); the reader must drop that tail and a repaired log must take new lines."""
    log = tmp_path / "log.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", BIG_LINE, str(tmp_path)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline() == b"writing\n"
        while log.stat().st_size <= len(b'{"i": 0}\n') and proc.poll() is None:
            pass  # kill as soon as the big write has begun
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()

    assert [r["i"] for r in read_jsonl(log)] in ([0], [0, 1])
    repair_jsonl_tail(log)
    append_line(log, '{"i": 2}')
    assert [r["i"] for r in read_jsonl(log)][-1] == 2
    assert log.read_bytes().endswith(b'{"i": 2}\n')
