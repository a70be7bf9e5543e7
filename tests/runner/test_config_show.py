"""``agent-s3 config show`` and the generated configuration page."""

from __future__ import annotations

import json
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict
from typer.testing import CliRunner

from core.config import ConfigError
from gprm import GUIDES
from runner.cli import app
from runner.config import RunConfig
from runner.config_doc import REGENERATE, configuration_page
from runner.config_fields import checked_elsewhere, tables
from runner.config_show import attribute, describe_source, layers_of, shown_fields
from runner.model_config import Section

ROOT = Path(__file__).resolve().parents[2]
_PROJECT = ("core", "environments", "aws", "agent_s3", "gprm", "bjudge", "themis", "runner")


def _by_path(layers: list[tuple[str, str | Path]]) -> dict[str, tuple[str, str]]:
    return {f.path: (f.value, f.source) for f in shown_fields(attribute(layers))}


def test_each_value_is_attributed_to_the_last_layer_that_set_it(tmp_path: Path) -> None:
    preset = tmp_path / "preset.yaml"
    preset.write_text("rollout: {max_steps: 11, max_wait_seconds: 9}\nguide: {name: gprm}\nwide: {rollouts: 4}\n")
    run = tmp_path / "run.yaml"
    run.write_text("rollout: {max_steps: 22}\nguide: {options: {max_tool_calls: 1}}\n")
    rows = _by_path([("preset p", preset), (f"file {run}", run), ("flag -c wide.rollouts=6", "wide.rollouts=6")])
    assert rows["rollout.max_steps"] == ("22", f"file {run}")  # the file wins over the preset
    assert rows["rollout.max_wait_seconds"] == ("9.0", "preset p")
    assert rows["wide.rollouts"] == ("6", "flag -c wide.rollouts=6")  # the flag wins over the preset
    assert rows["rollout.record"] == ("false", "default")
    assert rows["guide.name"] == ("gprm", "preset p")
    # the guide's options are shown through its Options model: set ones and defaults
    assert rows["guide.options.max_tool_calls"] == ("1", f"file {run}")
    assert rows["guide.options.memory_threshold"] == ("5", "default")
    assert rows["critic.options.selector_rounds"] == ("6", "default")


def test_a_value_the_configuration_fills_in_is_derived_not_default() -> None:
    rows = _by_path([("flag -c environment.kind=android", "environment.kind=android")])
    assert rows["rollout.settle_seconds"] == ("1.0", "derived")  # the android kind's settle time
    assert rows["environment.kind"][1] == "flag -c environment.kind=android"
    assert _by_path([])["rollout.settle_seconds"] == ("3.0", "default")


def test_a_mapping_set_whole_attributes_its_keys_and_a_later_layer_wins() -> None:
    layers: list[tuple[str, str | Path]] = [("flag -c a", "rollout={max_steps: 3, record: true}"),
                                            ("flag -c b", "rollout.max_steps=4")]
    rows = _by_path(layers)
    assert rows["rollout.max_steps"] == ("4", "flag -c b")
    assert rows["rollout.record"] == ("true", "flag -c a")


def test_a_mapping_field_set_by_key_and_a_fleet_through_its_model() -> None:
    rows = _by_path([("flag -c k", "environment.kind=aws"), ("flag -c r", "environment.fleet.region=eu-west-1"),
                     ("flag -c s", "rollout.settle_by_kind.aws=2")])
    assert rows["environment.fleet.region"] == ("eu-west-1", "flag -c r")
    assert rows["environment.fleet.max_instances"] == ("40", "default")  # aws.FleetConfig's default
    assert rows["rollout.settle_by_kind"] == ("{aws: 2.0}", "flag -c s")
    assert rows["rollout.settle_seconds"] == ("2.0", "derived")


def test_source_labels_redact_secrets() -> None:
    assert describe_source("policy.api_key=sk-live-123") == "flag -c policy.api_key=<redacted>"
    assert describe_source("policy.base_url=https://u:pw@h/v1") == "flag -c policy.base_url=https://<redacted>@h/v1"
    assert describe_source("runs/a/config.json") == "file runs/a/config.json"
    rows = _by_path([("flag", "policy.api_key=sk-live-123"), ("flag u", "policy.base_url=https://u:pw@h/v1")])
    assert rows["policy.api_key"][0] == "<redacted>"
    assert rows["policy.base_url"][0] == "https://<redacted>@h/v1"
    shown = CliRunner().invoke(app, ["config", "show", "--json", "-c", "policy.api_key=sk-live-123", "policy"])
    assert shown.exit_code == 0 and "sk-live" not in shown.output
    fields = {f["path"]: f for f in json.loads(shown.output)}
    assert fields["policy.api_key"]["source"] == "flag -c policy.api_key=<redacted>"
    assert fields["policy.timeout"] == {"path": "policy.timeout", "value": "600.0", "source": "default",
                                        "doc": "Seconds one attempt of a call may take (a reasoning model may think for minutes)."}


def test_layers_put_the_preset_first_and_refuse_unknown_ones() -> None:
    layers = layers_of(["rollout.max_steps=2"], "s3-osworld")
    assert [label for label, _ in layers] == ["preset s3-osworld", "flag -c rollout.max_steps=2"]
    with pytest.raises(ConfigError, match="unknown preset"):
        layers_of([], "no-such-preset")


def test_config_show_through_the_cli(tmp_path: Path) -> None:
    run = tmp_path / "run.yaml"
    run.write_text("guide: {name: gprm, candidates: 4}\n")
    result = CliRunner().invoke(app, ["config", "show", "--preset", "s3-osworld", "-c", str(run),
                                      "-c", "rollout.max_steps=30", "rollout", "guide"])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line.split(maxsplit=1)[1] for line in result.output.splitlines()}
    assert lines["rollout.max_steps"].startswith("30") and "flag -c rollout.max_steps=30" in lines["rollout.max_steps"]
    assert f"file {run}" in lines["guide.candidates"] and "K, the candidates proposed" in lines["guide.candidates"]
    assert "preset s3-osworld" not in lines["guide.name"] and "default" in lines["rollout.record"]
    assert not any(k.startswith("policy.") for k in lines)  # only the sections asked for
    changed = CliRunner().invoke(app, ["config", "show", "--changed", "-c", "seed=7"])
    assert changed.exit_code == 0 and changed.output.split() [:3] == ["seed", "7", "flag"]


def test_config_show_refuses_a_bad_key_in_one_line() -> None:
    result = CliRunner().invoke(app, ["config", "show", "-c", "rollout.max_stpes=3"])
    assert result.exit_code == 2
    assert "unknown config key 'rollout.max_stpes'" in result.output and "Traceback" not in result.output
    unknown = CliRunner().invoke(app, ["config", "show", "nosuch"])
    assert unknown.exit_code == 2 and "no field 'nosuch'" in unknown.output


def test_every_field_has_a_doc_and_every_untyped_mapping_a_model() -> None:
    # the project's own models (another test may have registered a guide or critic of its own)
    own = [t for t in tables() if t.model.__module__.split(".")[0] in _PROJECT]
    undocumented = [r.path for t in own for r in t.rows if not r.doc]
    assert not undocumented, f"give these fields a docstring in their model: {undocumented}"
    untyped = []
    for t in own:
        for name, info in t.model.model_fields.items():
            if _untyped(info.annotation) and checked_elsewhere(t.model, name) is None:
                untyped.append(f"{t.model.__name__}.{name}")
    # ReplyFormat's schema is set by the code that asks for structured replies, never by a user.
    assert untyped == ["ReplyFormat.json_schema"], f"mark these core.config.Checks (the model that checks them at load): {untyped}"


class _MineOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    depth: int = 3
    """How deep the guide looks."""


class _MineGuide:
    name = "mine"
    Options = _MineOptions


class _Extra(Section):
    """A section a later change adds."""

    knob: float = 0.5
    """What the knob turns."""


class _Grown(RunConfig):
    extra: _Extra = _Extra()


def test_new_fields_guides_and_sections_are_documented_without_editing_the_generator() -> None:
    GUIDES.register("mine", _MineGuide)  # type: ignore[arg-type]
    try:
        found = {r.path: r for t in tables(_Grown) for r in t.rows}
        titles = [t.title for t in tables(_Grown)]
    finally:
        GUIDES.unregister("mine")
    assert found["extra.knob"].doc == "What the knob turns." and found["extra.knob"].default == "0.5"
    assert found["extra"].doc == "A section a later change adds."
    assert "`guide.options` (guide.name: mine)" in titles and found["guide.options.depth"].type == "int"
    assert "mine" in found["guide.name"].type


def _untyped(annotation: object) -> bool:
    """A mapping or list whose entries are `Any` (a union member counts)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return any(_untyped(a) for a in args)
    return origin in (dict, list) and any(a is typing.Any or _untyped(a) for a in args)


def test_config_doc_prints_the_page() -> None:
    result = CliRunner().invoke(app, ["config", "doc"])
    assert result.exit_code == 0 and result.output == configuration_page()
    assert result.output.startswith("# Configuration") and REGENERATE in result.output


def test_the_configuration_page_is_current() -> None:
    """CI's check: the checked-in page is what the models generate now."""
    page = subprocess.run([sys.executable, "-m", "runner.config_doc"], capture_output=True, text=True,
                          check=True, cwd=ROOT).stdout
    checked_in = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page == checked_in, f"docs/configuration.md is out of date: run `{REGENERATE}`"
    rows = sum(line.startswith("| `") for line in page.splitlines())
    assert f"{rows} fields in" in page and "`guide.options.max_tool_calls`" in page
    assert "`environment.fleet.region`" in page and "`critic.options.selector_rounds`" in page
