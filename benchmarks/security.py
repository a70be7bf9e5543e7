"""Issues 18 and 24's attack chains against confined local desktops: attempts and escapes per attack.

Runs tests/security with SECURITY_SCALE raising how many times each attack is tried: the
chains through a real desktop's action executor, code sandbox, controller and revert; the
same chains through the real command line (`cli_*`: `agent-s3 bench osworld` and `run` on
hostile task files with hostile scripted replies, and `cli_wide_*`: the two rollouts of one
`run --rollouts 2` attacking each other; tried once per run, the CLI being slow);
issue 24's round two through the command line (the DevTools door forgery, task files acting
through OSWorld's metrics, 1 GiB replies, keyrings, user namespaces, gold answers, another
network namespace, control sequences, a run killed while its sandbox spawns, --resume of a
run killed early, a task file nested 200,000 deep, every output option at a device node);
and a networked desktop probing the host's addresses through its NAT. Root-only host
canaries are watched throughout. Prints one `attack: attempts N escapes M` line per attack
and the totals. The goal is 0 escapes.
Usage: python benchmarks/security.py [--scale N]"""

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
    parser.add_argument("--scale", type=int, default=3, help="tries per attack (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        sink = Path(folder) / "figures.txt"
        env = {**os.environ, "SECURITY_FIGURES": str(sink), "SECURITY_SCALE": str(args.scale)}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/security"],
                              cwd=ROOT, env=env, capture_output=True, text=True)  # fmt: skip
        seconds = time.perf_counter() - started
        lines = sink.read_text().splitlines() if sink.exists() else []
    attempts = escapes = cli = 0
    for line in lines:
        print(line)
        words = line.split()
        attempts += int(words[words.index("attempts") + 1])
        escapes += int(words[words.index("escapes") + 1])
        cli += line.startswith("cli_")
    print(f"security_attacks: {len(lines)}")
    print(f"security_attacks_through_the_cli: {cli}")
    print(f"security_attempts: {attempts}")
    print(f"security_escapes: {escapes}")
    print(f"security_seconds: {seconds:.1f}")
    if done.returncode != 0:
        print(done.stdout[-4000:] + done.stderr[-2000:], file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
