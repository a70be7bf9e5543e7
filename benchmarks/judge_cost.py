"""Behavior Judge's cost as a fraction of the rollouts', faithful default beside the
opt-in cheap preset (the paper, its Table 8: narratives $0.11 and judging $0.03 per task
against $0.72 of rollouts, 19 %).

Real wide runs (N rollouts, Behavior Judge) of local-suite tasks on local desktops, every
model's replies scripted and served over loopback HTTP by the OpenAI protocol server. The
ledger's token counts are then priced with the default price table as if each module ran
on a real model:

- ``faithful``: bjudge's defaults (native-size screenshots, the 300-px zoom on pointer
  steps and on the changed region of pointerless ones); policy, narrator and judge priced
  as ``--model``;
- ``cheap``: one more run with ``presets/judge-cheap.yaml``'s narrative settings, its
  narrator priced as that preset's narrator model and the judge as ``--model``.

Token counts are ESTIMATES: images by the providers' published image-token rules
(`core.llm.image_tokens`, OpenAI's unless ``--image-rules anthropic``) at the size actually
sent, text at about 4 characters a token. They are not a model's bill: scripted replies are
shorter than a real model's reasoning (``--reasoning-tokens N`` adds N output tokens to
every call when pricing), and no prompt-cache discount is applied.
``narratives_usd_per_task`` charges every transition one narrative call at the measured
mean price per call (the scripted rollouts are identical, so the run's fact cache serves
some of their transitions; ``narratives_measured_usd_per_task`` is what the run spent).

    python benchmarks/judge_cost.py [--tasks mousepad-append-line,terminal-make-dirs]
        [--rollouts 3] [--model openai/gpt-5] [--preset presets/judge-cheap.yaml]

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

import yaml

from core.llm import Ledger, PriceTable, Script, Usage
from core.llm.records import CallRecord
from core.llm.scripted import IMAGE_RULES_ENV
from core.trajectory import RunLayout
from environments.local.kind import LocalSettings
from runner.config import load_run_config
from runner.demo_judge import demo_judge_reply
from runner.demo_policy import DEMO_PLANS
from runner.environments import EnvironmentPool, open_pool
from runner.models import build_models
from runner.strategy import TaskRun
from runner.tasks import resolve_task
from runner.wide import WideScaling
from testing.llm import OpenAIServer

KEY = "sk-bench"
CHEAP_PRESET = Path(__file__).parents[1] / "presets" / "judge-cheap.yaml"
#: The paper's Table 8, dollars per task: narratives plus judging over rollouts.
PAPER_FRACTION = (0.11 + 0.03) / 0.72
ROLLOUT_MODULES = ("policy", "grounding", "reflection", "code_agent")
NARRATIVE, JUDGE = "narrative", "judge"
NOTE = ("token counts are estimates from the providers' published image-token rules and text "
        "length (about 4 characters a token), not a model's bill")


@dataclass
class TaskLedger:
    task: str
    setting: str
    records: list[CallRecord]
    chosen: int | None
    #: Steps the rollouts took, all narrated (each once, or from the fact cache).
    transitions: int


async def wide_run(root: Path, pool: EnvironmentPool, task_id: str, n: int, setting: str,
                   narrative: dict[str, Any], policy_url: str, judge_url: str,
                   max_steps: int | None = None) -> TaskLedger:
    """One wide run of `task_id` with Behavior Judge (`narrative` overrides bjudge's
    defaults; `max_steps` the rollouts' step limit); its ledger's records."""
    task = resolve_task(task_id)
    cfg = load_run_config([{
        "policy": {"model": "openai/cost-policy", "base_url": policy_url, "api_key": KEY, "max_connections": 64},
        "rollout": {"settle_seconds": 0.3, **({"max_steps": max_steps} if max_steps else {})},
        "strategy": "wide",
        "wide": {"rollouts": n, "seed": 3, "judge": "bjudge",
                 "judge_model": {"model": "openai/cost-judge", "base_url": judge_url, "api_key": KEY,
                                 "max_connections": 64},
                 "narrative": narrative},
    }])
    run_id = f"{task_id}-{setting}"
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
    return TaskLedger(task_id, setting, list(ledger.records), selection.chosen if selection else None, transitions)


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


def configuration(name: str, runs: list[TaskLedger], model: str, narrator_model: str, judge_model: str,
                  prices: PriceTable) -> dict[str, Any]:
    """Dollars per task of rollouts, narratives and judge, priced as named."""
    tasks = len(runs)
    rollouts = sum(_dollars(r.records, ROLLOUT_MODULES, model, prices) for r in runs) / tasks
    cached = sum(_dollars(r.records, (NARRATIVE,), narrator_model, prices) for r in runs) / tasks
    narratives = sum(_per_transition(r, narrator_model, prices) for r in runs) / tasks
    judge = sum(_dollars(r.records, (JUDGE,), judge_model, prices) for r in runs) / tasks
    fraction = (narratives + judge) / rollouts if rollouts else float("nan")
    return {
        f"{name}.rollouts_usd_per_task": rollouts,
        f"{name}.narratives_usd_per_task": narratives,
        f"{name}.narratives_measured_usd_per_task": cached,
        f"{name}.judge_usd_per_task": judge,
        f"{name}.narrator_model": narrator_model,
        f"{name}.judge_model": judge_model,
        f"{name}.judge_over_rollouts": fraction,
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


def cheap_preset(path: Path) -> tuple[dict[str, Any], str | None]:
    """(narrative settings, narrator model) of a judge preset file."""
    wide = (yaml.safe_load(path.read_text()) or {}).get("wide") or {}
    narrator = (wide.get("narrator_model") or {}).get("model")
    return dict(wide.get("narrative") or {}), narrator


async def main(args: argparse.Namespace) -> dict[str, Any]:
    os.environ[IMAGE_RULES_ENV] = args.image_rules
    _EXTRA_OUTPUT["tokens"] = args.reasoning_tokens
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in DEMO_PLANS]
    if unknown:
        raise SystemExit(f"no scripted plan for {', '.join(unknown)}; use tasks among {', '.join(DEMO_PLANS)}")
    cheap_narrative, cheap_narrator = cheap_preset(Path(args.preset))
    settings: dict[str, dict[str, Any]] = {"faithful": {}, "cheap": cheap_narrative}
    judge_script = Script("cost-judge", [demo_judge_reply] * 100_000)
    runs: dict[str, list[TaskLedger]] = {name: [] for name in settings}
    with tempfile.TemporaryDirectory(prefix="judge-cost-") as tmp:
        root = Path(tmp)
        async with AsyncExitStack() as stack:
            # One policy server per task, each playing that task's demo plan to every rollout.
            policy_urls = {task: (await stack.enter_async_context(OpenAIServer(
                Script(f"cost-policy-{task}", [copy.deepcopy(DEMO_PLANS[task])] * 100_000), api_key=KEY))).base_url
                for task in tasks}
            judge = await stack.enter_async_context(OpenAIServer(judge_script, api_key=KEY))
            pool = await stack.enter_async_context(open_pool(LocalSettings(base_dir=root / "envs"),
                                                             size=args.rollouts))
            for name, narrative in settings.items():
                for task in tasks:
                    runs[name].append(await wide_run(root / "runs", pool, task, args.rollouts, name, narrative,
                                                     policy_urls[task], judge.base_url))
    prices = PriceTable()
    model = args.model
    out: dict[str, Any] = {"note": NOTE, "image_rules": args.image_rules, "tasks": ",".join(tasks),
                           "rollouts": args.rollouts, "cheap_preset": args.preset,
                           "reasoning_tokens_added_per_call": args.reasoning_tokens}
    for name in settings:
        out[f"{name}.chosen"] = ",".join(str(r.chosen) for r in runs[name])
    out.update(configuration("faithful", runs["faithful"], model, model, model, prices))
    out.update(configuration("cheap", runs["cheap"], model, cheap_narrator or model, model, prices))
    out["paper.judge_over_rollouts"] = PAPER_FRACTION
    for name in settings:
        out.update(token_lines(f"tokens-{name}", runs[name]))
    return out


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default="mousepad-append-line,terminal-make-dirs")
    p.add_argument("--rollouts", type=int, default=3)
    p.add_argument("--model", default="openai/gpt-5")
    p.add_argument("--preset", default=str(CHEAP_PRESET), help="The cheap judge preset measured beside the default.")
    p.add_argument("--reasoning-tokens", type=int, default=0,
                   help="Output tokens added to every call of every module when pricing (a reasoning model's "
                        "hidden reasoning; the scripted replies have none).")
    p.add_argument("--image-rules", choices=["openai", "anthropic"], default="openai")
    return p.parse_args()


if __name__ == "__main__":
    for name, value in asyncio.run(main(_parse())).items():
        print(f"{name}: {value:.4f}" if isinstance(value, float) else f"{name}: {value}")
