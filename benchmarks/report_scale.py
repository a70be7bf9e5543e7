"""The run report at a whole benchmark's size: wall time and peak memory of `agent-s3 report`
on one run folder, with this checkout's sources beside another checkout's (``--src``), in the
same invocation and on the same folder.

A simulated 361 x 10 run (`benchmarks/sim_scale.py`) leaves a ledger of about 400,000 calls
(200 MB); the report adds them up per run, task and rollout. Both reports must be the same
page, byte for byte: the comparison says so.

    python benchmarks/report_scale.py RUN_DIR --src /tmp/old/src
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

HERE_SRC = Path(__file__).resolve().parents[1] / "src"
CALL = "import sys; from runner.cli import app; sys.argv = ['agent-s3', 'report', sys.argv[1]]; app()"


def _measure(src: Path, run_dir: Path) -> tuple[float, int, str]:
    """Seconds, peak resident KiB of the report's own process (its rusage from `wait4`),
    and the page's digest."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CALL, str(run_dir)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"})
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"report with {src} failed: {err.decode(errors='replace').strip()[-300:]}")
    digest = hashlib.sha256((run_dir / "report.html").read_bytes()).hexdigest()[:16]
    return seconds, usage.ru_maxrss, digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--src", type=Path, required=True, help="another checkout's src folder (the reference)")
    args = parser.parse_args()
    ledger = args.run_dir / "ledger.jsonl"
    size = ledger.stat().st_size / 2**20 if ledger.exists() else 0.0
    ours = _measure(HERE_SRC, args.run_dir)
    theirs = _measure(args.src, args.run_dir)
    print(f"run {args.run_dir} (ledger {size:.0f} MiB)")
    print(f"{'':14}{'seconds':>10}{'peak MiB':>10}  page")
    print(f"{'this checkout':14}{ours[0]:>10.1f}{ours[1] / 1024:>10.0f}  {ours[2]}")
    print(f"{'reference':14}{theirs[0]:>10.1f}{theirs[1] / 1024:>10.0f}  {theirs[2]}")
    print(f"ratio (reference / this): time {theirs[0] / ours[0]:.2f}x, memory {theirs[1] / ours[1]:.2f}x; "
          f"pages {'identical' if ours[2] == theirs[2] else 'DIFFER'}")


if __name__ == "__main__":
    main()
