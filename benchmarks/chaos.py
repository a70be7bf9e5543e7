"""The chaos scenarios at a larger scale, their figures printed as `name: value` lines.

Runs tests/chaos (model faults with repeated runner kills and secrets set, hostile requests,
hostile model output, environment faults, cloud faults) with CHAOS_SCALE raising the counts
(runner kills, cloud instances), collects the figures each scenario reports and prints them.
Usage: python benchmarks/chaos.py [--scale N]"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=2, help="how many times CI's counts (default 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        sink = Path(folder) / "figures.txt"
        env = {**os.environ, "CHAOS_FIGURES": str(sink), "CHAOS_SCALE": str(args.scale)}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/chaos"],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        figures = sink.read_text() if sink.exists() else ""
    print(figures, end="")
    print(f"chaos_scale: {args.scale}")
    print(f"chaos_seconds: {seconds:.1f}")
    print(f"chaos_scenarios_passed: {int(done.returncode == 0)}")
    if done.returncode != 0:
        print(done.stdout[-4000:] + done.stderr[-2000:], file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
