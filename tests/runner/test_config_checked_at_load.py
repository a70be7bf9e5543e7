"""Dict-typed configuration sections are checked by their models when the configuration is
loaded (`core.config.Checks`), each bad key refused in one line naming its whole path: a
guide's or critic's ``options`` by the ``Options`` of the part its ``name`` names (a part of
your own by dotted path too), ``models`` by `Profile`, ``environment.fleet`` by
`FleetConfig`, ``environment.overrides`` by `FleetProfile`, ``wide.mixture``'s entries by
`MixtureEntry`. The section keeps what was written (recorded and compared on resume as
written), and the configuration page says where each is checked."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.config import ConfigError, dump_config
from runner.cli import app
from runner.config import load_run_config
from runner.config_doc import configuration_page
from themis import CRITICS


@pytest.mark.parametrize(("layers", "line"), [
    (["guide.name=gprm", "guide.options.max_tools=1"],
     r"invalid config: guide\.options\.max_tools for gprm: Extra inputs are not permitted \(its options: max_reasks, "),
    (["critic.name=lastk", "critic.options.k=0"],
     r"invalid config: critic\.options\.k for lastk: Input should be greater than or equal to 1$"),
    (['models={"openai/my-proxy": {"temprature": "none"}}'],
     r"invalid config: models\.openai/my-proxy\.temprature: Extra inputs are not permitted"),
    (['models={"openai/my-proxy": {"temperature": "sometimes"}}'],
     r"invalid config: models\.openai/my-proxy\.temperature: Input should be 'any', 'one' or 'none'"),
    (["environment.kind=aws", "environment.fleet.regoin=eu-west-1"],
     r"invalid config: environment\.fleet\.regoin: Extra inputs are not permitted \(its keys: region, "),
    (["environment.kind=sim", 'environment.overrides={"providers": {"aws": {"failure_per_hr": 0.1}}}'],
     r"invalid config: environment\.overrides\.providers\.aws\.failure_per_hr: Extra inputs are not permitted$"),
    ([{"wide": {"mixture": [{"model": "openai/gpt-5", "cuont": 2}]}}],
     r"invalid config: wide\.mixture\.0\.cuont: Extra inputs are not permitted \(its keys: model, count, "),
])
def test_a_bad_key_of_a_dict_section_is_refused_at_load_in_one_line(layers: list[object], line: str) -> None:
    with pytest.raises(ConfigError, match=line) as caught:
        load_run_config(layers)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)


def test_good_sections_load_and_keep_what_was_written() -> None:
    cfg = load_run_config([
        "guide.name=gprm", "guide.options.max_tool_calls=2", "critic.options.selector_rounds=2",
        'models={"openai/my-proxy": {"temperature": "none"}}',  # a partial profile: merged over the rules
        {"wide": {"mixture": [{"model": "openai/gpt-5", "count": 2}, "anthropic/claude-sonnet-4-5*1"]}},
    ])
    assert cfg.guide.options == {"max_tool_calls": 2} and cfg.critic.options == {"selector_rounds": 2}
    shown = dump_config(cfg)
    assert shown["guide"]["options"] == {"max_tool_calls": 2}  # not filled with the defaults
    aws = load_run_config(["environment.kind=aws", "environment.fleet.region=eu-west-1"])
    assert aws.environment.fleet == {"region": "eu-west-1"}  # type: ignore[attr-defined]
    sim = load_run_config(["environment.kind=sim", 'environment.overrides={"providers": {"aws": {"failure_per_hour": 0.1}}}'])
    assert sim.environment.overrides["providers"]["aws"]["failure_per_hour"] == 0.1  # type: ignore[attr-defined]
    assert load_run_config(["guide.options.anything=1"]).guide.options == {"anything": 1}  # no guide: nothing reads them


@pytest.fixture
def own_critic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / "my_critic.py").write_text(textwrap.dedent('''
        from typing import ClassVar
        from pydantic import BaseModel, ConfigDict

        class Opts(BaseModel):
            model_config = ConfigDict(extra="forbid")
            word: str = "ACCEPT"

        class Strict:
            name = "strict-word"
            Options: ClassVar[type[BaseModel]] = Opts

            def __init__(self, model, options):
                self.options = options

            async def __call__(self, task, rollout):
                raise AssertionError("only this critic's options are checked here; it never runs")
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_critic:Strict"
    sys.modules.pop("my_critic", None)
    CRITICS.unregister("strict-word")


def test_a_critic_of_your_own_has_its_options_checked_at_load(own_critic: str) -> None:
    assert load_run_config([f"critic.name={own_critic}", "critic.options.word=OK"]).critic.options == {"word": "OK"}
    with pytest.raises(ConfigError, match=r"critic\.options\.wrod for my_critic:Strict: Extra inputs are not permitted"):
        load_run_config([f"critic.name={own_critic}", "critic.options.wrod=OK"])


def test_the_command_line_says_it_in_one_line_before_anything_starts(tmp_path: Path) -> None:
    done = CliRunner().invoke(app, ["run", "--task", "Type hello.", "--model", "scripted/demo", "--out", str(tmp_path),
                                    "-c", "environment.kind=aws", "-c", "environment.fleet.instance_tpye=t3.large"])
    assert done.exit_code == 2, done.output
    lines = [line for line in done.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "environment.fleet.instance_tpye: Extra inputs are not permitted" in lines[0]
    assert not any(tmp_path.iterdir())


def test_the_page_says_where_each_section_is_checked() -> None:
    page = configuration_page()
    for path in ("guide.options", "critic.options", "models", "environment.fleet", "environment.overrides", "wide.mixture"):
        row = next(line for line in page.splitlines() if line.startswith(f"| `{path}` |"))
        assert "Checked when the configuration is loaded by" in row, row
