"""An environment kind written outside the project, named by dotted path, runs through the
command line: ``run --env my_kinds:PEBBLE``, ``-c environment.kind=my_kinds:PEBBLE`` and
``bench osworld --env my_kinds:PEBBLE`` take ``package.module:KIND`` wherever they take a
registered kind's name (`environments.kinds.KINDS` is a `core.registry.Registry`), and
nothing of agent-s3 is edited to add it (the module lives in a temporary folder on
``sys.path``); the built-in kinds are still found by `load_kinds`."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from runner_helpers import flatten, module_elsewhere
from typer.testing import CliRunner

from core.llm import Script
from core.trajectory import RunLayout
from environments.kinds import KINDS, get_kind, kind_names, settings_from
from runner.cli import app
from runner.config import load_run_config
from runner.demo_policy import PlannedReplies, action_reply

#: What a user writes to add a kind of their own: a module of their own.
MINE = '''
"""A pebble: an environment in memory that scores a task 1 once an action was taken."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from test_environment_kinds import Paper

from environments.kinds import EnvironmentKind, EnvironmentSettings, PoolRequest
from environments.pool import FixedPool

OPENED: list[Any] = []


class PebbleSettings(EnvironmentSettings):
    kind: Literal["pebble"] = "pebble"
    weight: int = 1
    """Grams."""

    def where(self) -> str:
        return f"a pebble of {self.weight} g"


class Pebble(Paper):
    async def prepare_task(self, task: Any, cache_dir: Path) -> None:
        await self.revert()

    async def score_task(self, task: Any, cache_dir: Path, *, last_action: str | None) -> float:
        return 1.0 if self.actions else 0.0


@asynccontextmanager
async def open_pebble(cfg: PebbleSettings, request: PoolRequest) -> Any:
    OPENED.append((cfg, request))
    yield FixedPool(Pebble())


PEBBLE = EnvironmentKind(name="pebble", settings=PebbleSettings, description="a pebble in memory",
                         open_pool=open_pebble, settle_seconds=0.0)
NOT_A_KIND = 3
'''

PATH = "my_kinds:PEBBLE"


@pytest.fixture
def mine(tmp_path: Path) -> Iterator[Path]:
    # a kind named by path is registered under its name: unregistered afterwards
    with module_elsewhere(tmp_path / "elsewhere", "my_kinds", MINE, (KINDS, "pebble")) as folder:
        yield folder


def _policy(name: str) -> None:
    Script(name, [PlannedReplies(plan=[action_reply("I press Enter.", 'agent.hotkey(["enter"])'),
                                       action_reply("Done.", "agent.done()")])] * 20)


def test_the_builtin_kinds_are_still_discovered() -> None:
    assert {"local", "osworld", "aws", "android", "qemu"} <= set(kind_names()) and kind_names()[0] == "local"


def test_a_kind_by_dotted_path_is_validated_by_its_own_settings(mine: Path) -> None:
    cfg = load_run_config([f"environment.kind={PATH}", "environment.weight=7"])
    assert cfg.environment.kind == "pebble" and cfg.environment.where() == "a pebble of 7 g"  # type: ignore[attr-defined]
    assert get_kind(PATH) is get_kind("pebble")
    with pytest.raises(ValueError, match=r"environment\.url: no setting of environment kind pebble"):
        load_run_config([f"environment.kind={PATH}", "environment.url=http://h:5000"])
    with pytest.raises(ValueError, match="my_kinds:NOT_A_KIND: not an environment kind"):
        settings_from({"kind": "my_kinds:NOT_A_KIND"})
    with pytest.raises(ValueError, match="cannot import no_such_module"):
        load_run_config(["environment.kind=no_such_module:KIND"])


def test_a_kind_by_dotted_path_runs_through_run(mine: Path, tmp_path: Path) -> None:
    _policy("pebble-run")
    for run_id, how in (("flag", ["--env", PATH]), ("config", ["-c", f"environment.kind={PATH}"])):
        result = CliRunner().invoke(app, [
            "run", *how, "-c", "environment.weight=3", "--task", "Press Enter once", "--model", "scripted/pebble-run",
            "--out", str(tmp_path / "runs"), "--run-id", run_id,
        ], env={"COLUMNS": "400"})  # fmt: skip
        assert result.exit_code == 0, result.output
        flat = flatten(result.output)
        assert "on a pebble of 3 g" in flat and "outcome done after 2 steps" in flat
        config = json.loads((RunLayout(tmp_path / "runs", run_id).path / "config.json").read_text())
        assert config["environment"]["kind"] == "pebble" and config["environment"]["weight"] == 3
    bad = CliRunner().invoke(app, ["run", "--env", "my_kinds:NOT_A_KIND", "--task", "x y"], env={"COLUMNS": "400"})
    assert bad.exit_code == 2 and "not an environment kind" in flatten(bad.output)


def test_a_kind_by_dotted_path_runs_through_bench(mine: Path, tmp_path: Path) -> None:
    _policy("pebble-bench")
    examples = tmp_path / "list" / "examples" / "stones"
    examples.mkdir(parents=True)
    (examples / "t1.json").write_text(json.dumps({"id": "t1", "instruction": "Press Enter once", "config": [],
                                                  "evaluator": {"func": "infeasible"}}))
    (tmp_path / "list" / "test.json").write_text(json.dumps({"stones": ["t1"]}))
    result = CliRunner().invoke(app, [
        "bench", "osworld", "--tasks", str(tmp_path / "list" / "test.json"), "--env", PATH,
        "--model", "scripted/pebble-bench", "--out", str(tmp_path / "runs"), "--run-id", "b",
    ], env={"COLUMNS": "400"})  # fmt: skip
    assert result.exit_code == 0, result.output
    scored = json.loads((RunLayout(tmp_path / "runs", "b").task("t1").path / "result.json").read_text())
    assert scored["scores"] == {"0": 1.0}
    assert len(sys.modules["my_kinds"].OPENED) == 1
