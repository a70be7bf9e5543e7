"""The Ray executor on a real single-node Ray cluster (loopback only, started once for the
session): the same scripted wide run of a local-suite task, once in process and once with
the desktops held by a Ray actor, gives the same files, scores and pick; killing the host
mid-rollout records the rollouts as environment_lost, stops the host's desktops and leaves
the run folder consistent; shutting Ray down leaves no Ray process behind."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from runner_helpers import sandboxes_under

from contract_replies import structured
from core.llm import Ledger, Script, ScriptRequest
from core.trajectory import RunLayout, Selection, TaskResult
from runner.config import load_run_config
from runner.demo_policy import DEMO_PLANS, PlannedReplies, action_reply
from runner.executors import open_environments
from runner.models import build_models
from runner.rollout import StepEvent, StepHook
from runner.strategy import TaskRun
from runner.tasks import resolve_task
from runner.wide import WideScaling
from testing.llm import OpenAIServer

pytestmark = [pytest.mark.desktop, pytest.mark.integration, pytest.mark.slow]

KEY = "sk-ray-test-key"
TASK = "mousepad-append-line"


def _solver() -> PlannedReplies:
    return PlannedReplies(plan=list(DEMO_PLANS[TASK].plan))


def _gives_up() -> PlannedReplies:
    return PlannedReplies(plan=[action_reply("The list is not there.", "agent.fail()")])


def _narrator_and_judge(judge_prompts: list[str]) -> Any:
    """Facts from what the action text says; the judge picks the candidate that typed
    'apples' and saved."""

    def reply(request: ScriptRequest) -> str:
        system = next((m.text() for m in request.messages if m.role == "system"), "")
        text = "\n".join(m.text() for m in request.messages if m.role != "system")
        if system.startswith("You describe what a single computer action"):
            facts = ["A new last line 'apples' appears in the editor"] if "apples" in text else []
            if "'s'" in text or '"s"' in text:
                facts.append("The file was saved")
            listed = "\n".join(f"- {f}" for f in facts or ["Nothing visible changed"])
            return f"<thoughts>Compared.</thoughts>\n<facts>\n{listed}\n</facts>"
        judge_prompts.append(text)
        parts = re.split(r"===== Candidate (\d+) =====", text)
        for number, body in zip(parts[1::2], parts[2::2], strict=True):
            if "'apples'" in body and "saved" in body:
                return f"<thoughts>Candidate {number} typed apples and saved.</thoughts>\n<answer>{number}</answer>"
        return "<thoughts>None does.</thoughts>\n<answer>1</answer>"

    return structured(reply)


@dataclass
class Ran:
    strategy: WideScaling
    result: TaskResult
    layout: RunLayout
    judge_prompts: list[str]
    seconds: float

    def files(self) -> set[str]:
        root = self.layout.path
        return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}

    def selection(self) -> Selection | None:
        return self.layout.task(TASK).read_selection()


async def _run(root: Path, kind: str, *, hooks: list[StepHook] | None = None,
               wide: dict[str, Any] | None = None, executor: dict[str, Any] | None = None,
               pool_seen: list[Any] | None = None) -> Ran:
    task = resolve_task(TASK)
    judge_prompts: list[str] = []
    async with AsyncExitStack() as stack:
        urls = []
        for name, plan in (("solver", _solver()), ("gives-up", _gives_up())):
            server = await stack.enter_async_context(
                OpenAIServer(Script(f"ray-{kind}-{root.name}-{name}", [plan] * 200), api_key=KEY))
            urls.append({"model": f"openai/{name}", "base_url": server.base_url, "api_key": KEY})
        judge = await stack.enter_async_context(OpenAIServer(
            Script(f"ray-{kind}-{root.name}-judge", [_narrator_and_judge(judge_prompts)] * 200), api_key=KEY))
        cfg = load_run_config([{
            "policy": {"model": urls[0]["model"], "base_url": urls[0]["base_url"], "api_key": KEY},
            "rollout": {"settle_seconds": 0.2},
            "environment": {"base_dir": str(root / "envs")},
            "executor": {"kind": kind, **(executor or {})},
            "strategy": "wide",
            "wide": {"mixture": urls, "seed": 11, "judge": "bjudge",
                     "judge_model": {"model": "openai/judge", "base_url": judge.base_url, "api_key": KEY},
                     **(wide or {})},
        }])
        layout = RunLayout(root / "runs", "run", durable=False)
        layout.path.mkdir(parents=True, exist_ok=True)
        ledger = Ledger(layout.ledger_path)
        models = build_models(cfg, ledger)
        strategy = WideScaling()
        started = time.perf_counter()
        try:
            async with open_environments(cfg, size=2, hide=(str(root / "runs"),)) as pool:
                if pool_seen is not None:
                    pool_seen.append(pool)
                run = TaskRun(task=task, layout=layout, config=cfg, pool=pool, models=models, ledger=ledger,
                              hooks=list(hooks or []))
                result = await strategy(run)
        finally:
            await strategy.aclose()
            await models.aclose()
    return Ran(strategy, result, layout, judge_prompts, time.perf_counter() - started)


def _xvfb_under(base: Path) -> list[int]:
    return sandboxes_under(base)


def test_ray_and_asyncio_give_the_same_run(ray_cluster: None, tmp_path: Path) -> None:
    in_process = asyncio.run(_run(tmp_path / "asyncio", "asyncio"))
    on_ray = asyncio.run(_run(tmp_path / "ray", "ray"))
    for ran in (in_process, on_ray):
        outcomes = ran.strategy.outcomes[TASK]
        assert [o.result.status for o in outcomes] == ["done", "failed"]
        assert [o.score for o in outcomes] == [1.0, 0.0]
        assert ran.result.selected == 0 and ran.result.selected_score == 1.0 and ran.result.n == 2
        assert len(ran.judge_prompts) == 1
    # Same files (steps, pictures, narratives, evaluator cache, ledger), same pick and reasons.
    assert on_ray.files() == in_process.files()
    assert on_ray.result == in_process.result
    mine, theirs = on_ray.selection(), in_process.selection()
    assert mine is not None and theirs is not None
    assert (mine.chosen, mine.candidates, mine.reasoning) == (theirs.chosen, theirs.candidates, theirs.reasoning)
    assert on_ray.judge_prompts == in_process.judge_prompts
    # The rollouts ran on the actor's desktops, and the driver's ledger is the run's only one.
    headers = on_ray.layout.task(TASK).headers()
    assert all("@" in (headers[k].environment or "") for k in (0, 1))
    assert {headers[0].environment, headers[1].environment} != {None}
    modules = [r.module for r in Ledger.read(on_ray.layout.ledger_path)]
    assert modules.count("judge") == 1 and "policy" in modules and "narrative" in modules
    assert sorted(p.name for p in on_ray.layout.path.rglob("ledger*.jsonl")) == ["ledger.jsonl"]
    assert not _xvfb_under(tmp_path)


@pytest.mark.parametrize("restarts", [0, 1])
def test_a_lost_host_is_restarted_or_its_rollouts_recorded_lost(ray_cluster: None, tmp_path: Path,
                                                                restarts: int) -> None:
    """The host actor is killed in the middle of one rollout. With a restart allowed the
    rollout runs again on a fresh host and the run ends as it would have; without, the
    loss is recorded (not raised) and the judge picks among the rest. Either way the
    killed host's desktops stop."""
    import ray

    from runner.executors.ray_pool import RayPool

    pools: list[Any] = []
    killed: list[int] = []

    other = RunLayout(tmp_path / "runs", "run", durable=False).rollout(TASK, 1)

    async def kill_host(event: StepEvent) -> None:
        """Kill the host in the solver's first step, once the other rollout is scored."""
        if event.rollout != 0 or killed:
            return
        for _ in range(200):
            header = await asyncio.to_thread(other.read_info)
            if header is not None and header.score is not None:
                break
            await asyncio.sleep(0.1)
        pool = pools[0]
        assert isinstance(pool, RayPool)
        killed.append(event.rollout)
        ray.kill(pool.hosts[0].actor, no_restart=True)

    ran = asyncio.run(_run(tmp_path, "ray", hooks=[kill_host], wide={"max_retries": 1}, pool_seen=pools,
                           executor={"host_restarts": restarts}))
    assert killed
    outcomes = ran.strategy.outcomes[TASK]
    task_dir = ran.layout.task(TASK)
    if restarts:
        assert [o.result.status for o in outcomes] == ["done", "failed"]
        assert [o.score for o in outcomes] == [1.0, 0.0] and ran.result.selected == 0
        header = task_dir.rollout(0).read_info()
        assert header is not None and header.attempts == 2
        assert pools[0].hosts[0].restarts == 1 and len(ran.judge_prompts) == 1
    else:
        assert [o.result.status for o in outcomes] == ["environment_lost", "failed"]
        assert [o.score for o in outcomes] == [None, 0.0]
        header = task_dir.rollout(0).read_info()
        assert header is not None and header.finished and header.attempts == 2
        assert "Ray host" in (header.reason or "")
        assert ran.result.selected == 1  # the only candidate left
    assert task_dir.read_result() == ran.result
    # The killed actor's desktops are stopped by their watchdog, the fresh host's by the pool.
    deadline = time.monotonic() + 15
    while _xvfb_under(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert not _xvfb_under(tmp_path)


def test_the_command_line_joins_the_cluster_and_leaves_it_running(ray_cluster: None, tmp_path: Path) -> None:
    """`agent-s3 run --executor ray --ray-address HOST:PORT` from another process: the
    rollout runs on desktops of the cluster's host actor, and the CLI only disconnects. (A
    wide run from the command line on this cluster, both rollouts on the host actor and the
    judge's pick, is test_ray_bench.py's `bench local`.)"""
    import ray

    cli = Path(sys.executable).with_name("agent-s3")
    if not cli.exists():
        pytest.skip("the agent-s3 console script is not installed in this environment")
    address = ray.get_runtime_context().gcs_address
    assert address.startswith("127.0.0.1:")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["AGENT_S3_ENV_DIR"] = str(tmp_path / "envs")
    done = subprocess.run(
        [str(cli), "run", "--task", TASK, "--model", "scripted/demo", "--executor", "ray", "--ray-address", address,
         "--out", str(tmp_path / "runs"), "--run-id", "cli", "--settle", "0.2"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    layout = RunLayout(tmp_path / "runs", "cli")
    header = layout.rollout(TASK, 0).read_info()
    assert header is not None and header.status == "done" and header.score == 1.0
    assert header.environment is not None and "@" in header.environment
    assert ray.is_initialized() and ray.nodes()[0]["Alive"]  # the cluster outlived the CLI
    assert not _xvfb_under(tmp_path)
    bad = subprocess.run([str(cli), "run", "--task", TASK, "--model", "scripted/demo", "--executor", "ray",
                          "--ray-address", "no such place", "--out", str(tmp_path / "runs")],
                         env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--ray-address" in bad.stderr
