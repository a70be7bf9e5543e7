"""Judging cost against rollout cost at the paper's rollout lengths, beside its 19 %.

`judge_cost.py` measures Behavior Judge's cost on the demo plans, rollouts of 3 to 5 steps;
the paper's rollouts take tens of steps (Table 2: 35 calls per task). Here the same real
wide runs (N rollouts and Behavior Judge on a local desktop at its native 1920x1080, every
role's prompt built and sent as in a real run: policy with its history, grounding,
reflection, the narrator's augmented transitions, one MCQ judge call) use a scripted plan
of L steps of ordinary editing in mousepad (clicks, typing, shortcuts, scrolling) for each
L of ``--lengths``, and price each module's ledger as ``--model`` by the providers'
image-token rules (estimates, like `judge_cost.py`: no prompt-cache discount; hidden
reasoning added with ``--reasoning-tokens``).

The fraction is (narratives + judging) ÷ rollouts per task, the paper's Table 8 reading
($0.11 + $0.03 of $0.72 = 19 %). Narration costs a call per step like the policy, so it
tracks the policy's cost; judging is one call per task whose prompt grows with the
facts, so it shrinks relative to the rollouts as they lengthen.

    python benchmarks/judge_cost_length.py [--lengths 5,15,30,50] [--rollouts 2]
        [--model openai/gpt-5] [--reasoning-tokens 1500]

Prints a table; needs root and the desktop packages (local desktops).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import judge_cost
from core.llm import PriceTable, Script
from core.llm.scripted import IMAGE_RULES_ENV
from environments.local.kind import LocalSettings
from runner.demo_judge import demo_judge_reply
from runner.demo_policy import PlannedReplies, action_reply
from runner.environments import open_pool
from testing.llm import OpenAIServer

TASK = "mousepad-append-line"
_CYCLE = [
    ("I put the cursor in the text.", 'agent.click("the text area of the editor window", 1, "left")'),
    ("I go to the end of the list.", "agent.hotkey(['ctrl', 'end'])"),
    ("I add an item on its own line.", "agent.type(text='item {n}', enter=True)"),
    ("I look at the top of the list.", "agent.hotkey(['ctrl', 'home'])"),
    ("I scroll down to see the rest.", 'agent.scroll("the text area of the editor window", -3, False)'),
    ("I open the Edit menu to check its entries.", 'agent.click("the Edit menu", 1, "left")'),
    ("The menu is not needed; I close it.", "agent.hotkey(['escape'])"),
    ("I save the file.", "agent.hotkey(['ctrl', 's'])"),
]


def long_plan(steps: int) -> PlannedReplies:
    """`steps` actions of ordinary editing, then done."""
    plan = []
    for i in range(steps - 1):
        thought, call = _CYCLE[i % len(_CYCLE)]
        plan.append(action_reply(thought, call.replace("{n}", str(i))))
    plan.append(action_reply("The list holds the new items and is saved.", "agent.done()"))
    return PlannedReplies(plan=plan, points={"the Edit menu": (60, 40)})


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    os.environ[IMAGE_RULES_ENV] = args.image_rules
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    rows: list[dict[str, Any]] = []
    prices = PriceTable()
    with tempfile.TemporaryDirectory(prefix="judge-cost-length-") as tmp:
        root = Path(tmp)
        async with AsyncExitStack() as stack:
            judge = await stack.enter_async_context(
                OpenAIServer(Script("length-judge", [demo_judge_reply] * 100_000), api_key=judge_cost.KEY))
            pool = await stack.enter_async_context(open_pool(LocalSettings(base_dir=root / "envs"), size=args.rollouts))
            for length in lengths:
                policy = await stack.enter_async_context(OpenAIServer(
                    Script(f"length-policy-{length}", [long_plan(length)] * 100_000), api_key=judge_cost.KEY))
                run = await judge_cost.wide_run(root / "runs", pool, TASK, args.rollouts, f"len{length}", {},
                                                policy.base_url, judge.base_url, max_steps=length + 1)
                judge_cost._EXTRA_OUTPUT["tokens"] = args.reasoning_tokens
                reasoning = judge_cost.configuration("r", [run], args.model, args.model, args.model, prices)
                judge_cost._EXTRA_OUTPUT["tokens"] = 0
                figures = judge_cost.configuration("f", [run], args.model, args.model, args.model, prices)
                tokens = judge_cost.token_lines("t", [run])
                steps = run.transitions / max(args.rollouts, 1)
                rows.append({"length": length, "steps_per_rollout": steps,
                             "rollouts_usd": figures["f.rollouts_usd_per_task"],
                             "narratives_usd": figures["f.narratives_usd_per_task"],
                             "judge_usd": figures["f.judge_usd_per_task"],
                             "fraction": figures["f.judge_over_rollouts"],
                             "fraction_reasoning": reasoning["r.judge_over_rollouts"],
                             "policy_input_per_call": tokens.get("t.policy.input_tokens_per_call", 0.0),
                             "narrative_input_per_call": tokens.get("t.narrative.input_tokens_per_call", 0.0),
                             "judge_input_per_call": tokens.get("t.judge.input_tokens_per_call", 0.0)})
                print(f"length {length}: {rows[-1]}", flush=True)
    return rows


def _table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [f"priced as {args.model}; tokens ESTIMATED by the providers' image rules ({args.image_rules}) at "
             f"1920x1080; N = {args.rollouts} rollouts; 'fraction +R': {args.reasoning_tokens} hidden reasoning "
             "tokens added to every call of every module",
             f"{'steps':>6}{'rollouts $':>12}{'narratives $':>14}{'judge $':>10}{'fraction':>10}{'fraction +R':>13}"
             f"{'policy in/call':>16}{'narrator in/call':>18}{'judge in':>10}"]
    for r in rows:
        lines.append(f"{r['steps_per_rollout']:>6.0f}{r['rollouts_usd']:>12.4f}{r['narratives_usd']:>14.4f}"
                     f"{r['judge_usd']:>10.4f}{r['fraction']:>10.3f}{r['fraction_reasoning']:>13.3f}"
                     f"{r['policy_input_per_call']:>16.0f}{r['narrative_input_per_call']:>18.0f}"
                     f"{r['judge_input_per_call']:>10.0f}")
    lines.append(f"paper (Table 8, GPT-5, real OSWorld rollouts): {judge_cost.PAPER_FRACTION:.3f}")
    return "\n".join(lines)


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", default="5,15,30,50")
    p.add_argument("--rollouts", type=int, default=2)
    p.add_argument("--model", default="openai/gpt-5")
    p.add_argument("--reasoning-tokens", type=int, default=1500,
                   help="hidden reasoning tokens per call for the second fraction (the scripted replies have none)")
    p.add_argument("--image-rules", choices=["openai", "anthropic"], default="openai")
    return p.parse_args()


if __name__ == "__main__":
    arguments = _parse()
    print(_table(asyncio.run(main(arguments)), arguments))
