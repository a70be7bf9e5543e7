"""What K candidates per step cost in wall time, through the runner's own path.

One local desktop runs the local suite's ``mousepad-append-line`` twice with the same
scripted plan, every model reply served over loopback HTTP by the OpenAI protocol server
and held back ``--latency`` seconds: first unguided (one candidate a step), then guided
(``--guide``, K = ``--candidates`` seeded candidates a step, the guide's replies held back
as long). Reflection is off, so a step's candidate is one policy call (plus one grounding
call on the click step). Measured in one run:

- ``candidates_over_policy_call``: wall time of a guided step's K candidates (the step's
  propose phase minus the guide's own seconds) ÷ one policy call's time from the ledger,
  median over the steps without grounding (goal ≤ 1.3): K candidates cost about one call.
- ``candidates_over_unguided_step``: the same K-candidate time ÷ the unguided rollout's
  propose time at the same step, median over all steps.
- ``guide_s`` and ``guided_propose_over_unguided``: what the guide's scoring adds.

    python benchmarks/guided_step.py [--candidates 4] [--latency 1.0] [--guide prm]

Prints ``name: value`` lines. The machine is shared: compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.llm import Ledger, Reply, Script, ScriptRequest
from core.trajectory import RunLayout, Step
from environments.local.kind import LocalSettings
from runner.config import load_run_config
from runner.demo_policy import DEMO_PLANS, PlannedReplies
from runner.environments import EnvironmentPool, open_pool
from runner.models import build_models
from runner.strategy import SingleRollout, TaskRun
from runner.tasks import resolve_task
from testing.llm import OpenAIServer

KEY = "sk-bench"
TASK = "mousepad-append-line"


def replies(latency: float) -> Callable[[ScriptRequest], Reply]:
    """The demo plan for the policy; the guide scores every candidate alike and its
    routing (GUI-PRA) calls the UI parser once, as the paper requires a tool, then ends;
    every reply `latency` seconds late."""
    plan = PlannedReplies(plan=list(DEMO_PLANS[TASK].plan))

    def reply(request: ScriptRequest) -> Reply:
        system = next((m.text() for m in request.messages if m.role == "system"), "")
        if system.startswith("You are a process reward model"):
            text = '<eval>{"score": 7, "reason": "on plan"}</eval>'
        elif system.startswith("You gather visual evidence") and "- terminate:" in system:
            text = '{"thought": "enough", "actions": [{"name": "terminate", "arguments": {"answer": "ok"}}]}'
        elif system.startswith("You gather visual evidence"):
            text = '{"thought": "layout", "actions": [{"name": "ui_parser", "arguments": {}}]}'
        else:
            text = plan(request)
        return Reply(text=text, delay=latency)

    return reply


async def one_run(root: Path, pool: EnvironmentPool, run_id: str, url: str, guide: dict[str, Any],
                  settle: float) -> tuple[list[Step], Ledger, str]:
    task = resolve_task(TASK)
    cfg = load_run_config([{
        "policy": {"model": "openai/bench-policy", "base_url": url, "api_key": KEY, "max_connections": 64},
        "worker": {"reflection": False},
        "rollout": {"settle_seconds": settle},
        "guide": guide,
    }])
    layout = RunLayout(root, run_id, durable=False)
    layout.path.mkdir(parents=True, exist_ok=True)
    ledger = Ledger(layout.ledger_path)
    models = build_models(cfg, ledger)
    strategy = SingleRollout()
    try:
        await strategy(TaskRun(task=task, layout=layout, config=cfg, pool=pool, models=models, ledger=ledger))
    finally:
        await models.aclose()
    steps = layout.rollout(task.id, 0).read().steps
    return steps, ledger, strategy.outcomes[task.id].result.status


def _candidates_s(step: Step) -> float:
    guide = step.guide or {}
    return step.timings.propose - float(guide.get("seconds") or 0.0)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"candidates": args.candidates, "guide": args.guide, "latency_s": args.latency}
    script = Script("bench-guided", [replies(args.latency)] * 100_000)
    with tempfile.TemporaryDirectory(prefix="guided-bench-") as tmp:
        root = Path(tmp)
        async with OpenAIServer(script, api_key=KEY) as server:
            t0 = time.perf_counter()
            async with open_pool(LocalSettings(base_dir=root / "envs"), size=1) as pool:
                out["desktop_start_s"] = time.perf_counter() - t0
                plain, _, plain_status = await one_run(root / "runs", pool, "unguided", server.base_url,
                                                       {"name": "none"}, args.settle)
                guided, ledger, guided_status = await one_run(
                    root / "runs", pool, "guided", server.base_url,
                    {"name": args.guide, "candidates": args.candidates, "options": _options(args.guide)}, args.settle)
    policy_call = statistics.median(r.seconds for r in ledger.records if r.module == "policy")
    plain_by_index = {s.index: s for s in plain}
    no_grounding = [s for s in guided if s.action and s.action.get("kind") != "click"]
    out.update({
        "unguided_status": plain_status,
        "guided_status": guided_status,
        "steps": len(guided),
        "policy_calls_per_guided_step": sum(r.module == "policy" for r in ledger.records) / max(len(guided), 1),
        "policy_call_s": policy_call,
        "candidates_step_s": statistics.median(_candidates_s(s) for s in no_grounding),
        "candidates_over_policy_call": statistics.median(_candidates_s(s) / policy_call for s in no_grounding),
        "candidates_over_unguided_step": statistics.median(
            _candidates_s(s) / plain_by_index[s.index].timings.propose for s in guided if s.index in plain_by_index),
        "guide_s": statistics.median(float((s.guide or {}).get("seconds") or 0.0) for s in guided),
        "guided_propose_over_unguided": statistics.median(
            s.timings.propose / plain_by_index[s.index].timings.propose for s in guided if s.index in plain_by_index),
    })
    return out


def _options(guide: str) -> dict[str, Any]:
    # GUI-PRA's tools would add OCR time that is not the candidates' concern here.
    return {"tools": False} if guide == "gprm" else {}


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--candidates", type=int, default=4)
    p.add_argument("--latency", type=float, default=1.0, help="Seconds each model call takes.")
    p.add_argument("--guide", choices=["gprm", "prm"], default="prm")
    p.add_argument("--settle", type=float, default=0.3)
    return p.parse_args()


if __name__ == "__main__":
    for name, value in asyncio.run(main(_parse())).items():
        print(f"{name}: {value:.3f}" if isinstance(value, float) else f"{name}: {value}")
