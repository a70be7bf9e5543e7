"""Wide scaling on real desktops, every model's replies served over HTTP by the local OpenAI
protocol server: three scripted policies diverge on a local task (one solves it), the
narrator and the judge answer from what they are shown, and the judge's pick is checked;
a killed desktop is retried on a fresh one or recorded, without stopping the selection;
re-judging the finished run makes no narrative call; the report shows the run."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from runner_helpers import desktops_missing, start_desktop

from contract_replies import structured
from core.llm import Ledger, Script, ScriptRequest
from core.protocols import EnvError, Environment
from core.trajectory import RunLayout, Task, TaskResult
from environments.local import LocalDesktop, LocalEnvironment
from environments.local.kind import LocalSettings
from environments.local.server_env import server_environment
from environments.local.spawner import run_all
from runner.cli.judge import rejudge
from runner.config import load_run_config
from runner.demo_policy import DEMO_PLANS, PlannedReplies, action_reply
from runner.environments import EnvironmentPool, open_pool
from runner.models import build_models
from runner.report import write_report
from runner.rollout import StepEvent, StepHook
from runner.strategy import TaskRun
from runner.tasks import resolve_task
from runner.wide import WideScaling
from testing.llm import OpenAIServer

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

KEY = "sk-wide-test-key"
TASK = "mousepad-append-line"


def _solver() -> PlannedReplies:
    plan = DEMO_PLANS[TASK]
    return PlannedReplies(plan=list(plan.plan))


def _wrong_item() -> PlannedReplies:
    return PlannedReplies(plan=[
        action_reply("I put the cursor in the text.", 'agent.click("the text area of the editor window", 1, "left")'),
        action_reply("To the end.", "agent.hotkey(['ctrl', 'end'])"),
        action_reply("I type the item.", "agent.type(text='bananas', enter=True)"),
        action_reply("I save.", "agent.hotkey(['ctrl', 's'])"),
        action_reply("Saved.", "agent.done()"),
    ])


def _gives_up() -> PlannedReplies:
    return PlannedReplies(plan=[action_reply("I cannot find the list.", "agent.fail()")])


def narrator_and_judge(seen: list[str]) -> Any:
    """The narrator states what the action text says it did; the judge picks the candidate
    whose facts show 'apples' typed and the file saved. `seen` gets every judge prompt."""

    def reply(request: ScriptRequest) -> str:
        system = next((m.text() for m in request.messages if m.role == "system"), "")
        text = "\n".join(m.text() for m in request.messages if m.role != "system")
        if system.startswith("You describe what a single computer action"):
            facts = []
            for item in ("apples", "bananas"):
                if f"'{item}'" in text or f'"{item}"' in text:
                    facts.append(f"A new last line '{item}' appears in the editor")
            if "'s'" in text or '"s"' in text:
                facts.append("The file was saved: the title no longer shows an asterisk")
            return "<thoughts>Compared the screens.</thoughts>\n<facts>\n" + "\n".join(
                f"- {f}" for f in facts or ["The text cursor moved in the editor"]) + "\n</facts>"
        seen.append(text)
        sections = re.split(r"===== Candidate (\d+) =====", text)
        for number, body in zip(sections[1::2], sections[2::2], strict=True):
            if "'apples'" in body and "saved" in body:
                return f"<thoughts>Candidate {number} typed apples (F3.1) and saved (F4.1).</thoughts>\n<answer>{number}</answer>"
        return "<thoughts>None solves it.</thoughts>\n<answer>1</answer>"

    return structured(reply)


class DesktopPool:
    """Lends the given desktops; a dead one is skipped, as the local provider replaces it."""

    def __init__(self, envs: Sequence[LocalEnvironment]) -> None:
        self.envs = list(envs)
        self._idle: asyncio.Queue[LocalEnvironment] = asyncio.Queue()
        for env in envs:
            self._idle.put_nowait(env)

    async def acquire(self) -> Environment:
        while True:
            env = await self._idle.get()
            if env.desktop.problem() is None:
                return env

    def release(self, env: Environment) -> None:
        assert isinstance(env, LocalEnvironment)
        self._idle.put_nowait(env)


@pytest.fixture(scope="module")
def wide_desktops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[LocalDesktop]]:
    reason = desktops_missing()
    if reason is not None:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("wide-envs")
    desktops = run_all([lambda n=n: start_desktop(base, f"wide-{n}", "tests-wide") for n in range(3)])
    yield desktops
    run_all([d.close for d in desktops])


async def _keep(_: LocalEnvironment) -> None:
    return None


@dataclass
class WideRun:
    strategy: WideScaling
    result: TaskResult
    layout: RunLayout
    ledger: Ledger
    task: Task
    judge_prompts: list[str]
    policy_requests: dict[str, list[ScriptRequest]]


async def run_wide(root: Path, pool: EnvironmentPool, plans: dict[str, PlannedReplies] | dict[str, PlannedReplies | str], *,
                   wide: dict[str, Any] | None = None, hooks: Sequence[StepHook] = (),
                   run_id: str = "wide-run") -> WideRun:
    task = resolve_task(TASK)
    judge_prompts: list[str] = []
    async with AsyncExitStack() as stack:
        urls = {name: plan if isinstance(plan, str) else (await stack.enter_async_context(
            OpenAIServer(Script(f"wide-{name}", [plan] * 300), api_key=KEY))).base_url for name, plan in plans.items()}
        judge = await stack.enter_async_context(
            OpenAIServer(Script("wide-judge", [narrator_and_judge(judge_prompts)] * 300), api_key=KEY))
        mixture = [{"model": f"openai/{name}", "base_url": url, "api_key": KEY} for name, url in urls.items()]
        first = mixture[0]
        cfg = load_run_config([{
            "policy": {"model": first["model"], "base_url": first["base_url"], "api_key": KEY},
            "rollout": {"settle_seconds": 0.2},
            "strategy": "wide",
            "wide": {"mixture": mixture, "seed": 7, "judge": "bjudge",
                     "judge_model": {"model": "openai/judge", "base_url": judge.base_url, "api_key": KEY},
                     **(wide or {})},
        }])
        layout = RunLayout(root / "runs", run_id, durable=False)
        layout.path.mkdir(parents=True, exist_ok=True)
        ledger = Ledger(layout.ledger_path)
        models = build_models(cfg, ledger)
        strategy = WideScaling()
        run = TaskRun(task=task, layout=layout, config=cfg, pool=pool, models=models, ledger=ledger,
                      hooks=list(hooks))
        try:
            result = await strategy(run)
        finally:
            await strategy.aclose()
            await models.aclose()
        requests = {name: list(Script.get(f"wide-{name}").requests) for name, p in plans.items() if not isinstance(p, str)}
    return WideRun(strategy, result, layout, ledger, task, judge_prompts, requests)


@pytest.fixture(scope="module")
def solved(wide_desktops: list[LocalDesktop], tmp_path_factory: pytest.TempPathFactory) -> WideRun:
    """One wide run of three diverging policies, shared by the tests that read it."""
    root = tmp_path_factory.mktemp("wide-run")

    async def go() -> WideRun:
        envs = [LocalEnvironment(d, server_environment(d), on_close=_keep) for d in wide_desktops]
        try:
            return await run_wide(root, DesktopPool(envs),
                                  {"wrong-item": _wrong_item(), "solver": _solver(), "gives-up": _gives_up()})
        finally:
            for env in envs:
                await env.close()

    return asyncio.run(go())


def test_the_judge_sees_three_narratives_and_picks_the_solver(solved: WideRun) -> None:
    task_dir = solved.layout.task(solved.task.id)
    outcomes = solved.strategy.outcomes[solved.task.id]
    assert [o.result.status for o in outcomes] == ["done", "done", "failed"]
    assert [o.score for o in outcomes] == [0.0, 1.0, 0.0]
    # One judge call, shown all three candidates, each with its facts.
    assert len(solved.judge_prompts) == 1
    prompt = solved.judge_prompts[0]
    assert [int(n) for n in re.findall(r"===== Candidate (\d+) =====", prompt)] == [1, 2, 3]
    assert "'apples'" in prompt and "'bananas'" in prompt and "declared the task impossible" in prompt
    selection = task_dir.read_selection()
    assert selection is not None and selection.chosen == 1 and sorted(selection.candidates) == [0, 1, 2]
    assert selection.seed == 7 and "typed apples" in selection.reasoning
    assert sorted(selection.permutations[0]) == [0, 1, 2]
    result = task_dir.read_result()
    assert result == solved.result
    assert result.selected == 1 and result.selected_score == 1.0 and result.pass_at_n == 1.0 and result.n == 3
    # Narratives were written, facts per step; the judge's and narrator's calls are in the ledger.
    narrative = task_dir.read_narrative(1)
    assert narrative is not None and len(narrative.facts) == 5
    assert any("'apples'" in f for f in narrative.facts[2])
    modules = {r.module for r in solved.ledger.records}
    assert {"policy", "narrative", "judge"} <= modules
    assert sum(r.module == "judge" for r in solved.ledger.records) == 1
    # Each rollout ran its own model with its own seed and stochastic decoding.
    headers = task_dir.headers()
    assert [headers[k].model for k in range(3)] == ["openai/wrong-item", "openai/solver", "openai/gives-up"]
    assert [headers[k].seed for k in range(3)] == [7, 8, 9]
    assert len({headers[k].environment for k in range(3)}) == 3
    for name, seed in (("wrong-item", 7), ("solver", 8), ("gives-up", 9)):
        policy = [r for r in solved.policy_requests[name] if r.messages[0].text().startswith("You operate")]
        assert policy and {r.config.seed for r in policy} == {seed} and {r.config.temperature for r in policy} == {1.0}
    # Only the policy decodes stochastically; reflection and grounding keep their model's decoding.
    others = [r for r in solved.policy_requests["solver"] if not r.messages[0].text().startswith("You operate")]
    assert others and {r.config.temperature for r in others} == {None}


async def test_rejudging_makes_no_narrative_call(solved: WideRun) -> None:
    judge_prompts: list[str] = []
    async with OpenAIServer(Script("wide-rejudge", [narrator_and_judge(judge_prompts)] * 20), api_key=KEY) as server:
        before = len(Ledger.read(solved.layout.ledger_path))
        judged = await rejudge(solved.layout, judge="mcq", representation="narrative",
                               model="openai/judge", base_url=server.base_url, api_key=KEY)
    new = Ledger.read(solved.layout.ledger_path)[before:]
    assert [r.module for r in new] == ["judge"]
    assert judged[solved.task.id].selection.chosen == 1
    assert len(judge_prompts) == 1


def test_report_marks_the_pick_and_links_only_existing_files(solved: WideRun) -> None:
    from html import unescape
    from html.parser import HTMLParser

    path = write_report(solved.layout)
    html = path.read_text()
    links: list[str] = []

    class Links(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            for name, value in attrs:
                if name in ("src", "href") and value and not value.startswith(("#", "data:")):
                    links.append(value)

    Links().feed(html)
    assert links and all((path.parent / link).is_file() for link in links)
    assert not any(link.startswith(("http:", "https:", "//")) for link in links)
    assert html.count('class="rollout chosen" id="rollout-1"') == 1 and html.count("CHOSEN") == 1
    shown = unescape(html)
    assert "typed apples" in shown and "A new last line 'apples' appears in the editor" in shown
    assert any("augmented" in link and link.endswith("-zoom.png") for link in links)
    for module in ("policy", "narrative", "judge"):
        assert f">{module}<" in html


async def test_a_killed_desktop_is_retried_on_a_fresh_one_and_selection_goes_on(tmp_path: Path) -> None:
    killed: list[int] = []
    pool_holder: list[Any] = []

    async def kill_once(event: StepEvent) -> None:
        if event.rollout != 1 or killed:
            return
        header = event.rollout_dir.read_info()
        env = next(e for e in pool_holder[0].provider.environments if e.name == header.environment)
        killed.append(env.info.pid)
        os.kill(env.info.pid, signal.SIGKILL)  # the X server: the next screenshot is lost

    cfg = LocalSettings(base_dir=tmp_path / "envs")
    async with open_pool(cfg, size=2) as pool:
        pool_holder.append(pool)
        ran = await run_wide(tmp_path, pool, {"solver": _solver(), "wrong-item": _wrong_item()},
                             wide={"max_retries": 1}, hooks=[kill_once])
    assert killed
    headers = ran.layout.task(ran.task.id).headers()
    assert headers[1].attempts == 2 and headers[1].status == "done"
    assert headers[1].environment not in {None, headers[0].environment}
    selection = ran.strategy.selections[ran.task.id]
    assert selection is not None and selection.chosen == 0 and sorted(selection.candidates) == [0, 1]
    # The retried rollout's narrative starts over: one set of facts per step of the last attempt.
    narrative = ran.layout.task(ran.task.id).read_narrative(1)
    assert narrative is not None and len(narrative.facts) == 5


async def test_a_provider_down_is_retried_then_recorded_and_the_rest_is_judged(
        tmp_path: Path, wide_desktops: list[LocalDesktop]) -> None:
    envs = [LocalEnvironment(d, server_environment(d), on_close=_keep) for d in wide_desktops[:2]]
    plans: dict[str, PlannedReplies | str] = {
        "solver": _solver(), "down": "http://127.0.0.1:9/v1", "wrong-item": _wrong_item()}
    try:
        ran = await run_wide(tmp_path, DesktopPool(envs), plans, wide={"max_retries": 1, "concurrency": 2},
                             run_id="provider-down")
    finally:
        for env in envs:
            await env.close()
    headers = ran.layout.task(ran.task.id).headers()
    assert headers[1].status == "errored" and headers[1].attempts == 2
    assert "model call failed" in (headers[1].reason or "")
    assert [headers[k].status for k in (0, 2)] == ["done", "done"]
    selection = ran.strategy.selections[ran.task.id]
    assert selection is not None and selection.candidates == sorted(selection.candidates) == [0, 2]
    assert selection.chosen == 0
    result = ran.layout.task(ran.task.id).read_result()
    assert result is not None and result.scores == {0: 1.0, 1: None, 2: 0.0} and result.selected_score == 1.0


class FlakyPool(DesktopPool):
    """Fails its first loan, as a pool that cannot start a replacement desktop would."""

    failed = False

    async def acquire(self) -> Environment:
        if not self.failed:
            self.failed = True
            raise EnvError("the replacement desktop did not start")
        return await super().acquire()


async def test_a_failed_loan_is_a_lost_attempt_and_retried(tmp_path: Path, wide_desktops: list[LocalDesktop]) -> None:
    envs = [LocalEnvironment(d, server_environment(d), on_close=_keep) for d in wide_desktops[:1]]
    try:
        ran = await run_wide(tmp_path, FlakyPool(envs), {"solver": _solver()},
                             wide={"max_retries": 1, "rollouts": 2}, run_id="flaky")
    finally:
        for env in envs:
            await env.close()
    headers = ran.layout.task(ran.task.id).headers()
    assert sorted(h.status for h in headers.values()) == ["done", "done"]
    assert sorted(h.attempts for h in headers.values()) == [1, 2]
    assert ran.result.selected is not None and ran.result.selected_score == 1.0


async def test_judge_none_runs_the_rollouts_and_chooses_nothing(tmp_path: Path,
                                                                wide_desktops: list[LocalDesktop]) -> None:
    envs = [LocalEnvironment(d, server_environment(d), on_close=_keep) for d in wide_desktops[:2]]
    try:
        ran = await run_wide(tmp_path, DesktopPool(envs), {"solver": _solver(), "gives-up": _gives_up()},
                             wide={"judge": "none"}, run_id="no-judge")
    finally:
        for env in envs:
            await env.close()
    task_dir = ran.layout.task(ran.task.id)
    assert ran.strategy.selections[ran.task.id] is None and task_dir.read_selection() is None
    assert ran.result.selected is None and ran.result.selected_score is None
    assert ran.result.scores == {0: 1.0, 1: 0.0} and ran.result.pass_at_n == 1.0
    assert not ran.judge_prompts and not any(r.module in ("narrative", "judge") for r in ran.ledger.records)
