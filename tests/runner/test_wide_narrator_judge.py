"""The paper's best setting: one model writes the facts, another judges (its Table 10).

A wide run on three simulated phones narrates with a model served by the local Anthropic
protocol server and judges with one served by the local OpenAI protocol server (official
SDKs both). Re-judging the run offline with a third judge model re-uses every cached fact:
the narrator's server gets no request and the ledger gains judge calls only."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from test_android_wide import KEY, SCREEN, TASK, _environment, _gives_up, _note_plan

from contract_replies import structured
from core.config import dump_config
from core.llm import Ledger, Script, ScriptRequest
from core.trajectory import RunLayout
from runner.cli.judge import rejudge
from runner.cli.wide import models_by_module
from runner.config import load_run_config
from runner.environments import open_pool
from runner.models import build_models
from runner.strategy import TaskRun
from runner.tasks import resolve_task
from runner.wide import WideScaling
from testing.android import FakeFleet, fake_fleet
from testing.llm import AnthropicServer, OpenAIServer

pytestmark = pytest.mark.integration

NARRATOR = "anthropic/claude-opus-5-5"
JUDGE = "openai/judge-a"
REJUDGE = "openai/judge-b"


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[FakeFleet]:
    with fake_fleet(3, tmp_path, screen=SCREEN) as started:
        yield started


@structured
def narrate(request: ScriptRequest) -> str:
    system = next((m.text() for m in request.messages if m.role == "system"), "")
    assert system.startswith("You describe what a single computer action"), "the judge asked the narrator's server"
    text = "\n".join(m.text() for m in request.messages if m.role != "system")
    typed = re.search(r'"text": "([^"]+)"', text)
    fact = f"A note '{typed.group(1)}' was saved in Notes" if typed else "The Notes app opened"
    return f"<thoughts>Compared the screens.</thoughts>\n<facts>\n- {fact}\n</facts>"


@structured
def judge(request: ScriptRequest) -> str:
    system = next((m.text() for m in request.messages if m.role == "system"), "")
    assert "judge" in system.lower() and not system.startswith("You describe"), "the narrator asked the judge's server"
    text = "\n".join(m.text() for m in request.messages if m.role != "system")
    sections = re.split(r"===== Candidate (\d+) =====", text)
    for number, body in zip(sections[1::2], sections[2::2], strict=True):
        if "'buy oat milk' was saved" in body:
            return f"<thoughts>Candidate {number} saved the asked note.</thoughts>\n<answer>{number}</answer>"
    return "<thoughts>None solves it.</thoughts>\n<answer>1</answer>"


async def test_narrator_and_judge_are_separate_models_and_rejudging_makes_no_narrative_call(
        fleet: FakeFleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    plans = {"soy": _note_plan("buy soy milk"), "solver": _note_plan("buy oat milk"), "gives-up": _gives_up()}
    layout = RunLayout(tmp_path / "runs", "split", durable=False)
    async with AsyncExitStack() as stack:
        urls = {}
        for name, plan in plans.items():
            server = OpenAIServer(Script(f"split-{name}", [plan] * 100), api_key=KEY)
            urls[name] = (await stack.enter_async_context(server)).base_url
        narrator = await stack.enter_async_context(AnthropicServer(Script("split-narrator", [narrate] * 100), api_key=KEY))
        judge_a = await stack.enter_async_context(OpenAIServer(Script("split-judge-a", [judge] * 10), api_key=KEY))
        judge_b = await stack.enter_async_context(OpenAIServer(Script("split-judge-b", [judge] * 10), api_key=KEY))
        mixture = [{"model": f"openai/{name}", "base_url": url, "api_key": KEY} for name, url in urls.items()]
        cfg = load_run_config([{
            "policy": {"model": mixture[0]["model"], "base_url": mixture[0]["base_url"], "api_key": KEY},
            "environment": _environment(fleet),
            "rollout": {"settle_seconds": 0.05},
            "strategy": "wide",
            "wide": {"mixture": mixture, "seed": 5, "judge": "bjudge",
                     "judge_model": {"model": JUDGE, "base_url": judge_a.base_url, "api_key": KEY},
                     "narrator_model": {"model": NARRATOR, "base_url": narrator.base_url, "api_key": KEY}},
        }])  # fmt: skip
        layout.path.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(layout.write_config, dump_config(cfg))
        ledger = Ledger(layout.ledger_path)
        models = build_models(cfg, ledger)
        strategy = WideScaling()
        try:
            async with open_pool(cfg.environment, size=3) as pool:
                run = TaskRun(task=resolve_task(TASK), layout=layout, config=cfg, pool=pool, models=models,
                              ledger=ledger)
                await strategy(run)
        finally:
            await strategy.aclose()
            await models.aclose()
        narrated = len(narrator.requests)
        assert narrated >= 3 and len(judge_a.requests) == 1 and not judge_b.requests
        task_dir = layout.task(TASK)
        first = task_dir.read_selection()
        assert first is not None and first.chosen == 1 and first.model == JUDGE and first.error is None
        assert task_dir.read_narrative(1).model == NARRATOR  # type: ignore[union-attr]
        before = Ledger.read(layout.ledger_path)
        used = models_by_module(before)
        assert used["narrative"] == [NARRATOR] and used["judge"] == [JUDGE]

        judged = await rejudge(layout, model=REJUDGE, base_url=judge_b.base_url, api_key=KEY)

        assert len(narrator.requests) == narrated  # every fact came from the cache
        assert len(judge_b.requests) == 1 and len(judge_a.requests) == 1
    assert judged[TASK].selection.chosen == 1 and judged[TASK].selection.model == REJUDGE
    new = Ledger.read(layout.ledger_path)[len(before):]
    assert [(r.module, r.model) for r in new] == [("judge", REJUDGE)]
