"""Mixtures: the text and YAML forms, how N rollouts are spread and seeded, and that every
malformed mixture is one line naming what to write, on the command line too (before any
desktop starts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli import app
from runner.config import load_run_config
from runner.mixture import MixtureError, assign, parse_mixture
from runner.strategy import check_strategy


def test_text_form_with_counts_and_defaults() -> None:
    entries = parse_mixture("openai/gpt-5*5, anthropic/claude-opus-4-5*5,vllm/ui-tars")
    assert [(e.model, e.count) for e in entries] == [
        ("openai/gpt-5", 5), ("anthropic/claude-opus-4-5", 5), ("vllm/ui-tars", 1)]
    assert all(e.decoding.temperature is None for e in entries)  # the strategy's temperature applies


def test_yaml_file_with_endpoint_and_decoding(tmp_path: Path) -> None:
    path = tmp_path / "mix.yaml"
    path.write_text("- {model: openai/gpt-5, count: 2, decoding: {temperature: 0.7, top_p: 0.9}}\n"
                    "- {model: vllm/ui-tars, base_url: 'http://127.0.0.1:8000/v1'}\n")
    first, second = parse_mixture(str(path))
    assert (first.count, first.decoding.temperature, first.decoding.top_p) == (2, 0.7, 0.9)
    assert second.base_url == "http://127.0.0.1:8000/v1" and second.count == 1


def test_assign_spreads_in_order_round_robin_with_distinct_seeds() -> None:
    entries = parse_mixture("a/x*2,b/y")
    slots = assign(entries, 5, 100)
    assert [s.entry.model for s in slots] == ["a/x", "a/x", "b/y", "a/x", "a/x"]
    assert [s.seed for s in slots] == [100, 101, 102, 103, 104]
    assert [s.entry.model for s in assign(entries, None, 0)] == ["a/x", "a/x", "b/y"]
    assert [s.entry.model for s in assign(entries, 1, 0)] == ["a/x"]


@pytest.mark.parametrize(("spec", "says"), [
    ("openai/gpt-5*x", "cannot read mixture item 'openai/gpt-5*x'"),
    ("gpt-5*3", "write provider/model*count"),
    ("openai/gpt-5*0", "count 0"),
    ("openai/gpt-5*2,,anthropic/c", "cannot read mixture item ''"),
    ("   ", "the mixture is empty"),
    ("missing.yaml", "mixture file missing.yaml does not exist"),
])
def test_malformed_mixtures_are_one_line(spec: str, says: str) -> None:
    with pytest.raises(MixtureError) as e:
        parse_mixture(spec)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_malformed_yaml_items_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {model: openai/gpt-5, count: -1}\n")
    with pytest.raises(MixtureError, match=r"item 1: count: .*greater than or equal to 1"):
        parse_mixture(str(bad))
    bad.write_text("model: openai/gpt-5\n")
    with pytest.raises(MixtureError, match="non-empty YAML list"):
        parse_mixture(str(bad))
    with pytest.raises(MixtureError, match="item 1: temperature: Extra inputs"):
        parse_mixture([{"model": "a/b", "temperature": 1}])


def test_config_check_before_any_desktop() -> None:
    cfg = load_run_config([{"strategy": "wide", "wide": {"mixture": "a/b*2", "rollouts": 3}}])
    check_strategy(cfg)
    with pytest.raises(MixtureError):
        check_strategy(load_run_config([{"strategy": "wide", "wide": {"mixture": "a/b*"}}]))


def test_command_line_rejects_a_bad_mixture_in_one_line() -> None:
    result = CliRunner().invoke(app, ["run", "--task", "mousepad-append-line", "--model", "scripted/demo",
                                      "--mixture", "openai/gpt-5*two"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == ["error: cannot read mixture item 'openai/gpt-5*two': write provider/model*count, "
                     "e.g. openai/gpt-5*5,anthropic/claude-opus-4-5*5"]
