"""Behavior Judge's cost as a fraction of the rollouts' (issue goal: ≤ 10 %; the paper
reports $0.14 of $0.72 per task).

Real wide runs (N rollouts, Behavior Judge) of local-suite tasks on local desktops, every
model's replies scripted and served over loopback HTTP by the OpenAI protocol server. The
ledger's token counts are then priced with the default price table as if each module ran
on a real model:

- ``all-<model>``: policy, grounding, reflection, coding agent, narrator and judge on
  ``--model``; narratives at bjudge's default image side;
- ``judge-<cheap>``: the same run, narrator and judge priced as ``--cheap-model``;
- ``all-<model>-side-<S>``: one more run per ``--sides`` entry, with
  ``wide.narrative.augment.longest_side=S`` (``-c`` on the command line);
- ``judge-<cheap>-side-<S>``: that run, narrator and judge on the cheap model.

Token counts are ESTIMATES: images by the providers' published image-token rules
(`core.llm.image_tokens`, OpenAI's unless ``--image-rules anthropic``) at the size actually
sent, text at about 4 characters a token. They are not a model's bill: scripted replies are
shorter than a real model's reasoning (``--reasoning-tokens N`` adds N output tokens to
every call when pricing), and no prompt-cache discount is applied.
``narratives_usd_per_task`` charges every transition one narrative call at the measured
mean price per call (the scripted rollouts are identical, so the run's fact cache serves
some of their transitions; ``narratives_measured_usd_per_task`` is what the run spent).

    python benchmarks/judge_cost.py [--tasks mousepad-append-line,terminal-make-dirs]
        [--rollouts 3] [--sides 768,512] [--model openai/gpt-5] [--cheap-model openai/gpt-5-mini]

Prints ``name: value`` lines.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bjudge import NarrativeConfig
from core.llm import Ledger, PriceTable, Script, Usage
from core.llm.fakeserver import OpenAIServer
from core.llm.records import CallRecord
from core.llm.scripted import IMAGE_RULES_ENV
from core.trajectory import RunLayout
from runner.config import EnvironmentConfig, load_run_config
from runner.demo_judge import demo_judge_reply
from runner.demo_policy import DEMO_PLANS
from runner.environments import EnvironmentPool, open_pool
from runner.models import build_models
from runner.strategy import TaskRun
from runner.tasks import resolve_task
from runner.wide import WideScaling

KEY = "sk-bench"
#: bjudge's default narrative image side (``wide.narrative.augment.longest_side``).
DEFAULT_SIDE = NarrativeConfig().augment.longest_side
ROLLOUT_MODULES = ("policy", "grounding", "reflection", "code_agent")
NARRATIVE, JUDGE = "narrative", "judge"
NOTE = ("token counts are estimates from the providers' published image-token rules and text "
        "length (about 4 characters a token), not a model's bill")


@dataclass
class TaskLedger:
    task: str
    side: int | None
    records: list[CallRecord]
    chosen: int | None
    #: Steps the rollouts took, all narrated (each once, or from the fact cache).
    transitions: int


async def wide_run(root: Path, pool: EnvironmentPool, task_id: str, n: int, side: int | None,
                   policy_url: str, judge_url: str) -> TaskLedger:
    """One wide run of `task_id` with Behavior Judge (narrative image side `side`, None:
    bjudge's default); its ledger's records."""
    task = resolve_task(task_id)
    cfg = load_run_config([{
        "policy": {"model": "openai/cost-policy", "base_url": policy_url, "api_key": KEY, "max_connections": 64},
        "rollout": {"settle_seconds": 0.3},
        "strategy": "wide",
        "wide": {"rollouts": n, "seed": 3, "judge": "bjudge",
                 "judge_model": {"model": "openai/cost-judge", "base_url": judge_url, "api_key": KEY,
                                 "max_connections": 64},
                 **({} if side is None else {"narrative": {"augment": {"longest_side": side}}})},
    }])
    run_id = f"{task_id}-side-{side}"
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
    selection = strategy.selections.get(task.id)
    transitions = sum(o.result.steps for o in strategy.outcomes[task.id])
    return TaskLedger(task_id, side, list(ledger.records), selection.chosen if selection else None, transitions)


#: Output tokens added to every call when pricing (``--reasoning-tokens``), for hidden reasoning.
_EXTRA_OUTPUT = {"tokens": 0}


def _dollars(records: list[CallRecord], modules: tuple[str, ...], model: str, prices: PriceTable) -> float:
    extra = _EXTRA_OUTPUT["tokens"]
    price = prices.lookup(model)
    if price is None:
        raise SystemExit(f"no price for {model!r} in the default table; pick a model listed in core/llm/prices.py")
    return sum(price.cost(Usage(input_tokens=r.input_tokens, output_tokens=r.output_tokens + extra,
                                cached_tokens=r.cached_tokens, cache_write_tokens=r.cache_write_tokens))
               for r in records if r.module in modules)


def _per_transition(run: TaskLedger, model: str, prices: PriceTable) -> float:
    """Narrative dollars as if every transition were narrated by its own call: the scripted
    rollouts follow one plan on identical desktops, so the fact cache serves some of their
    identical transitions, which diverging real rollouts would not share."""
    calls = [r for r in run.records if r.module == NARRATIVE]
    if not calls:
        return 0.0
    return _dollars(calls, (NARRATIVE,), model, prices) / len(calls) * max(run.transitions, len(calls))


def configuration(name: str, runs: list[TaskLedger], model: str, judge_model: str,
                  prices: PriceTable) -> dict[str, Any]:
    """Dollars per task of rollouts, narratives and judge, priced as named."""
    tasks = len(runs)
    rollouts = sum(_dollars(r.records, ROLLOUT_MODULES, model, prices) for r in runs) / tasks
    cached = sum(_dollars(r.records, (NARRATIVE,), judge_model, prices) for r in runs) / tasks
    narratives = sum(_per_transition(r, judge_model, prices) for r in runs) / tasks
    judge = sum(_dollars(r.records, (JUDGE,), judge_model, prices) for r in runs) / tasks
    fraction = (narratives + judge) / rollouts if rollouts else float("nan")
    return {
        f"{name}.rollouts_usd_per_task": rollouts,
        f"{name}.narratives_usd_per_task": narratives,
        f"{name}.narratives_measured_usd_per_task": cached,
        f"{name}.judge_usd_per_task": judge,
        f"{name}.judge_over_rollouts": fraction,
        f"{name}.meets_10pct": fraction <= 0.10,
    }


def token_lines(label: str, runs: list[TaskLedger]) -> dict[str, Any]:
    """Calls and estimated tokens per module per task, so the dollars can be checked."""
    tasks = len(runs)
    out: dict[str, Any] = {f"{label}.transitions_per_task": sum(r.transitions for r in runs) / tasks}
    modules = sorted({r.module for run in runs for r in run.records})
    for module in modules:
        recs = [r for run in runs for r in run.records if r.module == module]
        out[f"{label}.{module}.calls_per_task"] = len(recs) / tasks
        out[f"{label}.{module}.input_tokens_per_call"] = sum(r.input_tokens for r in recs) / len(recs)
        out[f"{label}.{module}.output_tokens_per_call"] = sum(r.output_tokens for r in recs) / len(recs)
    return out


async def main(args: argparse.Namespace) -> dict[str, Any]:
    os.environ[IMAGE_RULES_ENV] = args.image_rules
    _EXTRA_OUTPUT["tokens"] = args.reasoning_tokens
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in DEMO_PLANS]
    if unknown:
        raise SystemExit(f"no scripted plan for {', '.join(unknown)}; use tasks among {', '.join(DEMO_PLANS)}")
    judge_script = Script("cost-judge", [demo_judge_reply] * 100_000)
    sides: list[int | None] = [None, *(int(x) for x in args.sides.split(",") if x.strip())]
    runs: dict[int | None, list[TaskLedger]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory(prefix="judge-cost-") as tmp:
        root = Path(tmp)
        async with AsyncExitStack() as stack:
            # One policy server per task, each playing that task's demo plan to every rollout.
            policy_urls = {task: (await stack.enter_async_context(OpenAIServer(
                Script(f"cost-policy-{task}", [copy.deepcopy(DEMO_PLANS[task])] * 100_000), api_key=KEY))).base_url
                for task in tasks}
            judge = await stack.enter_async_context(OpenAIServer(judge_script, api_key=KEY))
            pool = await stack.enter_async_context(open_pool(EnvironmentConfig(base_dir=root / "envs"),
                                                             size=args.rollouts))
            for side in sides:
                for task in tasks:
                    runs[side].append(await wide_run(root / "runs", pool, task, args.rollouts, side,
                                                     policy_urls[task], judge.base_url))
    prices = PriceTable()
    model, cheap = args.model, args.cheap_model
    short_model, short_cheap = model.split("/", 1)[-1], cheap.split("/", 1)[-1]
    out: dict[str, Any] = {"note": NOTE, "image_rules": args.image_rules, "tasks": ",".join(tasks),
                           "rollouts": args.rollouts, "default_side": DEFAULT_SIDE, "small_sides": args.sides,
                           "reasoning_tokens_added_per_call": args.reasoning_tokens}
    for side in sides:
        suffix = "" if side is None else f"-side-{side}"
        out[f"chosen{suffix or '-default'}"] = ",".join(str(r.chosen) for r in runs[side])
        out.update(configuration(f"all-{short_model}{suffix}", runs[side], model, model, prices))
        out.update(configuration(f"judge-{short_cheap}{suffix}", runs[side], model, cheap, prices))
    for side in sides:
        out.update(token_lines(f"tokens-side-{side or DEFAULT_SIDE}", runs[side]))
    return out


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default="mousepad-append-line,terminal-make-dirs")
    p.add_argument("--rollouts", type=int, default=3)
    p.add_argument("--sides", default="768,512", help="Smaller narrative image sides tried, comma-separated.")
    p.add_argument("--model", default="openai/gpt-5")
    p.add_argument("--cheap-model", default="openai/gpt-5-mini")
    p.add_argument("--reasoning-tokens", type=int, default=0,
                   help="Output tokens added to every call of every module when pricing (a reasoning model's "
                        "hidden reasoning; the scripted replies have none).")
    p.add_argument("--image-rules", choices=["openai", "anthropic"], default="openai")
    return p.parse_args()


if __name__ == "__main__":
    for name, value in asyncio.run(main(_parse())).items():
        print(f"{name}: {value:.4f}" if isinstance(value, float) else f"{name}: {value}")
