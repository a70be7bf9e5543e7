"""The paper presets load as run configurations and hold the paper's settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import ConfigError
from runner.config import load_run_config
from runner.mixture import parse_mixture
from runner.presets import preset_names, preset_path, with_preset

PRESETS = Path(__file__).parents[2] / "presets"
CLI = Path(sys.executable).with_name("agent-s3")


def test_osworld_preset_is_the_papers_best_setting() -> None:
    cfg = load_run_config([PRESETS / "s3-osworld.yaml"])
    assert cfg.strategy == "wide" and cfg.wide.rollouts == 10 and cfg.wide.judge == "bjudge"
    entries = parse_mixture(cfg.wide.mixture)
    assert [(e.model.split("/")[0], e.count) for e in entries] == [("openai", 5), ("anthropic", 5)]
    assert cfg.rollout.max_steps == 100 and cfg.rollout.settle_seconds == 3.0
    assert cfg.wide.judge_model is not None and cfg.wide.narrator_model is not None
    assert cfg.wide.narrator_model.model != cfg.wide.judge_model.model
    assert cfg.grounding is not None and cfg.worker.grounding.style == "uitars"
    assert cfg.worker.grounding.space == "profile" and cfg.grounding.model == "vllm/ui-tars-1.5-7b"
    assert cfg.worker.code_agent is True
    assert cfg.wide.narrative.augment.longest_side is None and cfg.wide.narrative.augment.change_zoom
    assert cfg.wide.narrative.show_intent is False


@pytest.mark.parametrize(("name", "code_agent", "platform"), [
    ("s3-windowsagentarena.yaml", True, "windows"), ("s3-androidworld.yaml", False, "android")])
def test_windows_and_android_presets_run_three_rollouts(name: str, code_agent: bool, platform: str) -> None:
    cfg = load_run_config([PRESETS / name])
    assert cfg.strategy == "wide" and cfg.wide.rollouts == 3
    assert cfg.worker.code_agent is code_agent and cfg.worker.platform == platform
    assert cfg.wide.narrator_model is not None and cfg.wide.judge_model is not None
    assert cfg.wide.narrator_model.model != cfg.wide.judge_model.model


def test_the_cheap_judge_preset_layers_over_a_paper_preset() -> None:
    cfg = load_run_config([PRESETS / "s3-osworld.yaml", PRESETS / "judge-cheap.yaml"])
    assert cfg.wide.narrative.augment.longest_side == 768 and not cfg.wide.narrative.augment.change_zoom
    assert cfg.wide.narrator_model is not None and cfg.wide.narrator_model.model == "openai/gpt-6.1-terra"
    assert cfg.wide.rollouts == 10 and cfg.wide.judge_model is not None  # the rest of the paper setting stays


def test_a_preset_by_name_is_the_first_layer_and_later_layers_win() -> None:
    layers = with_preset("s3-osworld", ["rollout.max_steps=7"])
    assert layers == [str(PRESETS / "s3-osworld.yaml"), "rollout.max_steps=7"]
    cfg = load_run_config(layers)
    assert cfg.rollout.max_steps == 7 and cfg.wide.rollouts == 10
    assert with_preset(None, ["a=1"]) == ["a=1"]
    assert preset_names() == sorted(p.stem for p in PRESETS.glob("*.yaml"))


def test_unknown_preset_or_missing_folder_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown preset 's3-osworl'; use one of: .*s3-osworld"):
        preset_path("s3-osworl")
    with pytest.raises(ConfigError, match=r"presets folder .* is missing; .* -c PATH"):
        preset_path("s3-osworld", tmp_path / "nowhere")


@pytest.mark.parametrize("command", [["run", "--task", "mousepad-append-line"], ["bench", "local", "--run-id", "p"]])
def test_the_cli_takes_preset_names(tmp_path: Path, command: list[str]) -> None:
    if not CLI.exists():
        pytest.skip("the agent-s3 console script is not installed in this environment")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["AGENT_S3_ENV_DIR"] = str(tmp_path / "envs")
    unknown = subprocess.run([str(CLI), *command, "--preset", "nope", "--out", str(tmp_path / "runs")],
                             env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        f"error: unknown preset 'nope'; use one of: {', '.join(preset_names())} (or -c PATH for your own file)"]
    # From another folder the preset is still found: the run stops only at the preset's own policy model's key.
    policy = load_run_config([PRESETS / "s3-osworld.yaml"]).policy.model
    known = subprocess.run([str(CLI), *command, "--preset", "s3-osworld", "--out", str(tmp_path / "runs")],
                           env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert known.returncode == 2 and f"{policy} needs an API key" in known.stderr, known.stderr
