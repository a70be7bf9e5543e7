"""Environment kinds register themselves, and the runner holds no kind of its own.

A kind registered from this module (an in-memory environment) is offered by ``--env``,
validated by its own settings model, described in the run's header and runs a task
through the command line; a scan of the runner's source finds no comparison with a kind's
or a platform's name, so no kind can be special-cased there again.
"""

from __future__ import annotations

import ast
import io
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal

import pytest
from PIL import Image
from typer.testing import CliRunner

from core.llm import Script
from core.protocols import Environment, ExecResult, Sandbox
from core.trajectory import RunLayout
from environments.kinds import (
    EnvironmentKind,
    EnvironmentSettings,
    PoolRequest,
    field_help,
    get_kind,
    kind_names,
    kinds,
    register,
    unregister,
)
from environments.pool import EnvironmentPool, FixedPool
from runner.cli import app
from runner.config import load_run_config
from runner.demo_policy import PlannedReplies, action_reply

RUNNER = Path(__file__).resolve().parents[2] / "src" / "runner"
PLATFORMS = ("ubuntu", "windows", "android")


class PaperSettings(EnvironmentSettings):
    """A sheet of paper that remembers what was done to it (this test's own kind)."""

    kind: Literal["paper"] = "paper"
    colour: str = "white"
    """The paper's colour, shown in the run's header."""

    def where(self) -> str:
        return f"a {self.colour} sheet of paper"


class Paper(Environment):
    """An environment held in memory: a blank screen and a list of the actions run."""

    platform = "ubuntu"

    def __init__(self) -> None:
        self.name = "paper-1"
        self.actions: list[str] = []
        self.reverts = 0

    async def screenshot(self) -> bytes:
        out = io.BytesIO()
        Image.new("RGB", (640, 400), "white").save(out, "PNG")
        return out.getvalue()

    async def screen_size(self) -> tuple[int, int]:
        return (640, 400)

    async def cursor_position(self) -> tuple[int, int]:
        return (0, 0)

    async def act(self, code: str) -> ExecResult:
        self.actions.append(code)
        return ExecResult("ok", 0)

    def sandbox(self) -> Sandbox | None:
        return None

    async def revert(self) -> None:
        self.reverts += 1
        self.actions.clear()

    async def close(self) -> None:
        return None


OPENED: list[tuple[PaperSettings, PoolRequest, Paper]] = []


@asynccontextmanager
async def open_paper(cfg: PaperSettings, request: PoolRequest) -> AsyncIterator[EnvironmentPool]:
    paper = Paper()
    OPENED.append((cfg, request, paper))
    yield FixedPool(paper)


def _flat(text: str) -> str:
    """Command output as one line, without the boxes rich draws around help and errors."""
    return " ".join(text.replace("│", " ").split())


@pytest.fixture
def paper_kind() -> Iterator[EnvironmentKind[PaperSettings]]:
    kind = EnvironmentKind(name="paper", settings=PaperSettings, description="a sheet of paper in memory",
                           open_pool=open_paper, settle_seconds=0.0)
    register(kind)
    OPENED.clear()
    yield kind
    unregister("paper")


def test_the_builtin_kinds_register_themselves() -> None:
    assert {"local", "osworld", "aws", "android"} <= set(kind_names())
    assert kind_names()[0] == "local"  # the default first
    for kind in kinds():
        assert kind.settings.model_fields["kind"].default == kind.name
        assert kind.platforms and kind.description


def test_help_texts_come_from_the_registry() -> None:
    out = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "400"}).output
    flat = _flat(out)
    for kind in kinds():
        assert " ".join(f"{kind.name} ({kind.description})".split()) in flat
    assert "With --env android: Port of the adb server" in flat
    bench = _flat(CliRunner().invoke(app, ["bench", "osworld", "--help"], env={"COLUMNS": "400"}).output)
    for kind in kinds():  # the bench's --env help once omitted android
        assert f"{kind.name} (" in bench
    assert field_help("no_such_setting", "fallback") == "fallback"


def test_a_kind_registered_here_is_offered_validated_and_run(
    paper_kind: EnvironmentKind[PaperSettings], tmp_path: Path
) -> None:
    assert "paper" in kind_names() and get_kind("paper") is paper_kind
    cfg = load_run_config(["environment.kind=paper", "environment.colour=blue"])
    assert isinstance(cfg.environment, PaperSettings) and cfg.environment.colour == "blue"
    assert cfg.rollout.settle_seconds == 0.0  # the kind's own settle time
    Script("paper-kind", [PlannedReplies(plan=[action_reply("I press Enter.", 'agent.hotkey(["enter"])'),
                                               action_reply("Done.", "agent.done()")])] * 20)
    result = CliRunner().invoke(app, [
        "run", "--env", "paper", "-c", "environment.colour=blue", "--task", "Press Enter once",
        "--model", "scripted/paper-kind", "--out", str(tmp_path / "runs"), "--run-id", "paper",
    ], env={"COLUMNS": "400"})  # fmt: skip
    assert result.exit_code == 0, result.output
    flat = _flat(result.output)
    assert "on a blue sheet of paper" in flat and "outcome done after 2 steps" in flat
    (settings, request, paper), = OPENED
    assert settings.colour == "blue" and request.size == 1 and request.run_id == "paper"
    assert paper.reverts == 1 and paper.actions and "enter" in paper.actions[0]
    config = (RunLayout(tmp_path / "runs", "paper").path / "config.json").read_text()
    assert '"kind": "paper"' in config and '"colour": "blue"' in config


def test_a_setting_of_another_kind_or_an_unknown_kind_is_one_line(
    paper_kind: EnvironmentKind[PaperSettings], tmp_path: Path
) -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["run", "--env", "paper", "--url", "http://h:5000", "--task", "x y",
                              "--model", "scripted/demo", "--out", str(tmp_path)], env={"COLUMNS": "400"})
    assert out.exit_code == 2
    line = _flat(out.output)
    assert "environment.url: no setting of environment kind paper (its settings: colour, kind, sandbox)" in line
    out = runner.invoke(app, ["run", "--env", "papyrus", "--task", "x y", "--out", str(tmp_path)])
    assert out.exit_code == 2 and "use one of local," in _flat(out.output)
    assert "paper" in _flat(out.output)  # offered although registered after the CLI was built


def test_a_task_for_another_platform_names_the_kinds_that_run_it(tmp_path: Path) -> None:
    out = CliRunner().invoke(app, ["run", "--env", "local", "--task", "notes-save-shopping-item",
                                   "--model", "scripted/demo", "--out", str(tmp_path)], env={"COLUMNS": "400"})
    assert out.exit_code == 2
    assert "is for android, and --env local runs ubuntu tasks: pass --env android" in _flat(out.output)


def _kind_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """Comparisons whose every string literal is a kind's or platform's name (``kind ==
    "android"``, ``platform in ("ubuntu", "windows")``), and dict literals keyed by them."""
    names = set(kind_names()) | set(PLATFORMS)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            literals = [c.value for part in (node.left, *node.comparators) for c in ast.walk(part)
                        if isinstance(c, ast.Constant) and isinstance(c.value, str)]
            if literals and all(v in names for v in literals):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if keys and any(k in names for k in keys):
                found.append((node.lineno, ast.unparse(node)[:80]))
        elif isinstance(node, ast.Match):
            found.append((node.lineno, "match statement"))
    return found


def test_the_runner_compares_no_kind_or_platform_name() -> None:
    sources = sorted(RUNNER.rglob("*.py"))
    assert len(sources) > 40
    offences = {str(p.relative_to(RUNNER)): hits for p in sources
                if (hits := _kind_literals(ast.parse(p.read_text(), str(p))))}
    assert offences == {}
    assert not (RUNNER / "android.py").exists()  # the phone's pieces live in environments/android


def test_the_scan_would_notice_a_kind_branch() -> None:
    caught = _kind_literals(ast.parse('if cfg.kind == "android":\n    pass\nx = {"local": 1}\n'
                                      'ok = name in ("core", "aws")\n'))
    assert [line for line, _ in caught] == [1, 3]


def test_branching_on_a_kind_that_cannot_checkpoint_is_one_line(
    paper_kind: EnvironmentKind[PaperSettings], tmp_path: Path
) -> None:
    Script("paper-branch", [PlannedReplies(plan=[action_reply("I press Enter.", 'agent.hotkey(["enter"])')] * 5)] * 40)
    out = CliRunner().invoke(app, [
        "run", "--env", "paper", "--task", "Press Enter", "--model", "scripted/paper-branch", "--strategy", "branch",
        "--branch-at", "1", "--branches", "2", "--judge", "none", "--out", str(tmp_path / "runs"), "--run-id", "b",
    ], env={"COLUMNS": "400"})  # fmt: skip
    assert out.exit_code == 2, out.output
    assert "cannot checkpoint a running rollout: --strategy branch needs environments that can" in _flat(out.output)
