"""What a 1 GiB hostile reply costs the host: memory and disk of `agent-s3 run`, in the same run
as a benign reference.

Two runs of the real command line on a local desktop, recorded (``rollout.record``), with
SCRIPTED model replies served over HTTP (no model is called): the model types one command into
the task's terminal, then declares the task done, and the evaluator fetches ``~/result.bin``.

- ``benign``: the command writes the expected result file (it scores 1);
- ``hostile``: it writes a 1 GiB sparse result file (costing its desktop nothing) and swaps
  the server's recording for another 1 GiB sparse file while ffmpeg records.

For each it prints the peak resident memory of the whole command (its largest process) and
the disk its run folder takes (allocated blocks), then the hostile run's extra cost over the
benign one. ``--src DIR`` runs the same commands against another checkout's sources (say an
export of main before issue 24) as well, for a before-and-after in one invocation.

    python benchmarks/hostile_reply.py [--src /tmp/main/src]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from core.llm import Script
from runner.demo_policy import PlannedReplies, action_reply
from testing.llm import OpenAIServer

CLI = Path(sys.executable).with_name("agent-s3")
KEY = "sk-hostile-reply-" + "k" * 16
_SWAP = (
    "import glob, os, time\n"
    "for _ in range(100):\n"
    "    found = glob.glob('/tmp/agent_s3_recording_*/recording.mp4')\n"
    "    if found: break\n"
    "    time.sleep(0.1)\n"
    "for p in found:\n"
    "    os.unlink(p); f = open(p, 'wb'); f.truncate(1 << 30); f.close()\n"
)
_COMMANDS = {
    "benign": "echo expected > ~/result.bin",
    "hostile": "truncate -s 1G ~/result.bin; echo " + base64.b64encode(_SWAP.encode()).decode() + " | base64 -d | python3",
}
_PEAK = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[1:])\n"
    "print('PEAK-RSS-KIB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, flush=True)\n"
    "sys.exit(code)\n"
)


def _task(folder: Path) -> Path:
    (folder / "expected.txt").write_text("expected\n")
    task = {
        "id": "reply-size",
        "snapshot": "blank",
        "instruction": "Write the result file.",
        "config": [{"type": "launch", "parameters": {"command": ["xterm", "-T", "reply-term"]}}],
        "evaluator": {
            "func": "compare_text_file",
            "result": {"type": "vm_file", "path": "/home/user/result.bin", "dest": "result.bin"},
            "expected": {"type": "cloud_file", "path": "expected.txt", "dest": "want.txt"},
        },
    }
    path = folder / "reply-size.json"
    path.write_text(json.dumps(task))
    return path


def _disk(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


async def _one(case: str, task: Path, out: Path, src: str | None) -> tuple[int, int, str]:
    """(peak KiB, run folder bytes on disk, the run's score line) of one case."""
    plan = PlannedReplies(plan=[
        action_reply("One command in the terminal.", f"agent.type(text={_COMMANDS[case]!r}, enter=True)"),
        action_reply("Done.", "agent.done()"),
    ])  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(OPENAI_API_KEY=KEY, AGENT_S3_ENV_DIR=str(out / "envs"), COLUMNS="200")
    if src is not None:
        env["PYTHONPATH"] = src
    async with OpenAIServer(Script(f"hostile-{case}", [plan] * 200), api_key=KEY) as server:
        argv = [sys.executable, "-c", _PEAK, str(CLI), "run", "--task", str(task), "--model", "openai/test-model",
                "--base-url", server.base_url, "--out", str(out / "runs"), "--run-id", case, "--max-steps", "3",
                "--settle", "0.5", "-c", "rollout.record=true"]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(*argv, env=env, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT)  # fmt: skip
        said = (await asyncio.wait_for(proc.communicate(), 600))[0].decode(errors="replace")
    peak = re.search(r"PEAK-RSS-KIB (\d+)", said)
    score = next((line.strip() for line in said.splitlines() if line.startswith("score")), "score ?")
    videos = list((out / "runs" / case).glob("*/rollout-0/recording.mp4"))
    notes = list((out / "runs" / case).glob("*/rollout-0/recording-error.txt"))
    video = f"recording {videos[0].stat().st_size / 2**20:.1f} MiB" if videos else (
        "no recording: " + notes[0].read_text().strip()[:150] if notes else "no recording")
    return (int(peak.group(1)) if peak else -1), _disk(out / "runs" / case), f"{score[:160]}; {video}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", help="also run against this source folder (PYTHONPATH), e.g. main's")
    args = parser.parse_args()
    trees = [("this tree", None)] + ([("--src", args.src)] if args.src else [])
    print("hostile_reply: SCRIPTED model replies; a local desktop; 1 GiB sparse result + 1 GiB swapped recording")
    for label, src in trees:
        figures = {}
        for case in ("benign", "hostile"):
            with tempfile.TemporaryDirectory() as folder:
                task = _task(Path(folder))
                figures[case] = asyncio.run(_one(case, task, Path(folder), src))
            peak, disk, score = figures[case]
            print(f"{label:10} {case:8} peak_rss_mib {peak / 1024:7.0f}  run_folder_disk_mib {disk / 2**20:7.1f}  {score}")
        extra_mem = (figures["hostile"][0] - figures["benign"][0]) / 1024
        extra_disk = (figures["hostile"][1] - figures["benign"][1]) / 2**20
        print(f"{label:10} hostile_extra_memory_mib {extra_mem:.0f}  hostile_extra_disk_mib {extra_disk:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
