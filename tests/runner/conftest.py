"""Fixtures of the runner's tests: one real desktop for the module, and a harness that runs a
task on it with the policy's replies served over HTTP by the local OpenAI protocol server
(the official SDK on the wire, only the base URL differs from a real provider); and one
local Ray cluster for the whole session, shared by every Ray test."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from runner_helpers import HARNESS_MODELS, desktops_missing, live_commands, start_desktop

from core.llm import Ledger, Script, ScriptRequest
from core.protocols import Environment
from core.trajectory import RunLayout, Task, TaskResult, Trajectory
from environments.local import LocalDesktop, LocalEnvironment
from environments.local.server_env import server_environment
from environments.local.spawner import run_all
from runner.config import load_run_config
from runner.environments import FixedPool
from runner.models import build_models
from runner.rollout import StepHook
from runner.strategy import RolloutOutcome, SingleRollout, TaskRun
from testing.llm import AnthropicServer, FakeServer, OpenAIServer

API_KEY = "sk-runner-test-key"

Responder = Callable[[ScriptRequest], str]


@pytest.fixture(scope="module")
def runner_desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalDesktop]:
    """One desktop shared by a module's tests; every run reverts it to the task's snapshot."""
    reason = desktops_missing()
    if reason is not None:
        pytest.skip(reason)
    desktop = start_desktop(tmp_path_factory.mktemp("runner-envs"), "runner-tests", "tests-runner")
    yield desktop
    run_all([desktop.close])


async def _keep(_: LocalEnvironment) -> None:
    return None


@pytest.fixture
async def local_env(runner_desktop: LocalDesktop) -> AsyncIterator[LocalEnvironment]:
    env = LocalEnvironment(runner_desktop, server_environment(runner_desktop), on_close=_keep)
    yield env
    await env.close()


@dataclass
class Ran:
    """What one harness run left: the outcome, the files, the ledger and the wire."""

    outcome: RolloutOutcome
    result: TaskResult
    layout: RunLayout
    ledger: Ledger
    server: FakeServer
    task: Task

    @property
    def trajectory(self) -> Trajectory:
        return self.layout.rollout(self.task.id, 0).read()

    def system_prompts(self) -> list[str]:
        found = []
        for r in self.server.requests:
            system = r.body.get("system")
            if isinstance(system, str):
                found.append(system)
            elif isinstance(system, list):
                found.append("".join(part.get("text", "") for part in system))
            found += [m["content"] for m in r.body["messages"]
                      if m["role"] in ("system", "developer") and isinstance(m["content"], str)]
        return found


@dataclass
class Harness:
    root: Path

    async def run(
        self,
        task: Task,
        env: Environment,
        responder: Responder,
        *,
        config: dict[str, Any] | None = None,
        hooks: Sequence[StepHook] = (),
        run_id: str = "run-1",
        protocol: str = "openai",
    ) -> Ran:
        script = Script("runner-test", [responder] * 300)
        server_class = AnthropicServer if protocol == "anthropic" else OpenAIServer
        async with server_class(script, api_key=API_KEY) as server:
            base = {
                "policy": {"model": HARNESS_MODELS[protocol], "base_url": server.base_url, "api_key": API_KEY},
                "rollout": {"settle_seconds": 0.2},
            }
            cfg = load_run_config([base, config or {}])
            layout = RunLayout(self.root / "runs", run_id, durable=False)
            layout.path.mkdir(parents=True, exist_ok=True)
            ledger = Ledger(layout.ledger_path)
            models = build_models(cfg, ledger)
            strategy = SingleRollout()
            run = TaskRun(task=task, layout=layout, config=cfg, pool=FixedPool(env), models=models,
                          ledger=ledger, hooks=list(hooks))
            try:
                result = await strategy(run)
            finally:
                await models.aclose()
        return Ran(strategy.outcomes[task.id], result, layout, ledger, server, task)


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


_RAY_DAEMONS = ("raylet", "gcs_server")


def _ray_processes() -> set[int]:
    return {pid for pid, cmd in live_commands().items()
            if any(d in cmd for d in _RAY_DAEMONS) or "default_worker.py" in cmd}


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """A Ray instance on this machine, 2 CPUs, bound to 127.0.0.1, started once per session
    (Ray allows one per process); shut down and checked for leftovers at the end."""
    reason = desktops_missing()
    if reason is not None:
        pytest.skip(reason)
    import ray

    from runner.executors.ray_session import start_local_ray

    before = _ray_processes()
    start_local_ray(num_cpus=2)
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    try:
        yield
    finally:
        ray.shutdown()
        deadline = time.monotonic() + 20
        while (left := _ray_processes() - before) and time.monotonic() < deadline:
            time.sleep(0.25)
        assert not left, f"Ray processes left behind: {left}"
