"""Wide scaling overheads on local desktops, with models that take a realistic time to answer.

Every model (policy, grounding, reflection, narrator, judge) is a scripted reply served over
loopback HTTP by the OpenAI protocol server, held back `--latency` seconds (±20 % seeded
jitter, so rollouts differ). The task is the local suite's ``mousepad-append-line``; each
rollout runs on its own desktop. Measured in one run:

- ``wall_over_slowest``: wall time of the N rollouts (first start to last end) ÷ the slowest
  single rollout of that run, each from its start (borrowing a desktop, setting the task up)
  to its end (scored) (goal ≤ 1.1): what running them side by side adds.
  ``wall_over_slowest_agent_loop`` divides by the agent loop alone (setup and scoring out).
- ``selection_over_judge_call``: time from the last rollout's end to the selection ÷ the
  judge call's own time (goal ≤ 1.2): what narration and judging add after the rollouts.
- ``wall_over_solo``: the same wall time ÷ one rollout run alone first (CPU contention of
  N desktops on this machine shows here).

    python benchmarks/wide_scaling.py [--rollouts 10] [--latency 2.0] [--desktops N]

Prints ``name: value`` lines. The machine is shared: compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.llm import Ledger, Reply, Script, ScriptRequest
from core.trajectory import RunLayout
from runner.config import load_run_config
from runner.demo_judge import demo_judge_reply
from runner.demo_policy import DEMO_PLANS, PlannedReplies
from runner.environments import EnvironmentPool, open_pool
from runner.models import build_models
from runner.strategy import TaskRun
from runner.tasks import resolve_task
from runner.wide import WideScaling
from testing.llm import OpenAIServer

KEY = "sk-bench"
TASK = "mousepad-append-line"


def slow(answer: Callable[[ScriptRequest], str], latency: float, rng: random.Random) -> Callable[[ScriptRequest], Reply]:
    def reply(request: ScriptRequest) -> Reply:
        return Reply(text=answer(request), delay=latency * rng.uniform(0.8, 1.2))

    return reply


async def one_run(root: Path, pool: EnvironmentPool, run_id: str, n: int, policy_url: str, judge_url: str,
                  settle: float) -> tuple[WideScaling, Ledger]:
    task = resolve_task(TASK)
    cfg = load_run_config([{
        "policy": {"model": "openai/bench-policy", "base_url": policy_url, "api_key": KEY, "max_connections": 64},
        "rollout": {"settle_seconds": settle},
        "strategy": "wide",
        "wide": {"rollouts": n, "seed": 1, "judge": "bjudge",
                 "judge_model": {"model": "openai/bench-judge", "base_url": judge_url, "api_key": KEY,
                                 "max_connections": 64}},
    }])
    layout = RunLayout(root, run_id, durable=False)
    layout.path.mkdir(parents=True, exist_ok=True)
    ledger = Ledger(layout.ledger_path)
    models = build_models(cfg, ledger)
    strategy = WideScaling()
    run = TaskRun(task=task, layout=layout, config=cfg, pool=pool, models=models, ledger=ledger)
    try:
        await strategy(run)
    finally:
        await strategy.aclose()
        await models.aclose()
    return strategy, ledger


def plan_factory() -> Callable[[ScriptRequest], str]:
    """Each rollout's policy follows the demo plan; the plan reads the step from the prompt,
    so one planner answers every rollout."""
    plan = DEMO_PLANS[TASK]
    return PlannedReplies(plan=list(plan.plan))


async def main(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    desktops = args.desktops or args.rollouts
    policy_script = Script("bench-policy", [slow(plan_factory(), args.latency, rng)] * 100_000)
    judge_script = Script("bench-judge", [slow(demo_judge_reply, args.judge_latency or args.latency, rng)] * 100_000)
    out: dict[str, Any] = {"rollouts": args.rollouts, "desktops": desktops, "latency_s": args.latency}
    with tempfile.TemporaryDirectory(prefix="wide-bench-") as tmp:
        root = Path(tmp)
        async with (OpenAIServer(policy_script, api_key=KEY) as policy, OpenAIServer(judge_script, api_key=KEY) as judge):
            from environments.local.kind import LocalSettings

            t0 = time.perf_counter()
            async with open_pool(LocalSettings(base_dir=root / "envs"), size=desktops) as pool:
                out["desktops_start_s"] = time.perf_counter() - t0
                solo, _ = await one_run(root / "runs", pool, "solo", 1, policy.base_url, judge.base_url, args.settle)
                out["solo_rollout_s"] = solo.timings[TASK].span(0)
                out["solo_agent_loop_s"] = solo.timings[TASK].rollout_seconds[0]
                wide, ledger = await one_run(root / "runs", pool, "wide", args.rollouts, policy.base_url,
                                             judge.base_url, args.settle)
    t = wide.timings[TASK]
    statuses = [o.result.status for o in wide.outcomes[TASK]]
    wall = t.last_end - t.started
    slowest = max(t.span(k) for k in t.rollout_ends)
    slowest_loop = max(t.rollout_seconds.values())
    judge_calls = [r for r in ledger.records if r.module == "judge"]
    judge_s = sum(r.seconds for r in judge_calls)
    assert t.selected is not None
    after = t.selected - t.last_end
    out.update({
        "rollouts_done": statuses.count("done"),
        "wall_s": wall,
        "slowest_rollout_s": slowest,
        "wall_over_slowest": wall / slowest,
        "slowest_agent_loop_s": slowest_loop,
        "wall_over_slowest_agent_loop": wall / slowest_loop,
        "wall_over_solo": wall / out["solo_rollout_s"],
        "narrative_calls": sum(r.module == "narrative" for r in ledger.records),
        "judge_calls": len(judge_calls),
        "last_end_to_selection_s": after,
        "judge_call_s": judge_s,
        "selection_over_judge_call": after / judge_s if judge_s else float("nan"),
        "chosen": wide.selections[TASK].chosen if wide.selections[TASK] else None,
    })
    return out


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rollouts", type=int, default=10)
    p.add_argument("--desktops", type=int, default=None, help="Desktops to start (default: one per rollout).")
    p.add_argument("--latency", type=float, default=2.0, help="Seconds each model call takes (±20 %%).")
    p.add_argument("--judge-latency", type=float, default=None, help="Seconds of the judge's and narrator's calls.")
    p.add_argument("--settle", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


if __name__ == "__main__":
    for name, value in asyncio.run(main(_parse())).items():
        print(f"{name}: {value:.3f}" if isinstance(value, float) else f"{name}: {value}")
