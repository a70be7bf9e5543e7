"""The guide comparison: variants as guide settings, the paper preset, and
``agent-s3 bench local --guides …`` end to end on a real desktop (models over HTTP,
scripted): one run per variant on the same seed, then one table by difficulty."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from runner_helpers import desktops_missing, threaded_servers

from contract_replies import structured
from core.llm import GenerateConfig, Reply, Script, ScriptRequest
from core.llm.profiles import resolve, sampling_params
from runner.config import load_run_config
from runner.demo_policy import DEMO_PLANS
from runner.guide_ablation import GUIDE_VARIANTS, apply_variant, parse_guides, shared_seed
from runner.guided import guided_config
from testing.llm import OpenAIServer

PRESETS = Path(__file__).parents[2] / "presets"
AGENT = Path(sys.executable).with_name("agent-s3")
KEY = "sk-ablation-test"
TASK = "mousepad-append-line"


def test_variants_parse_in_order_and_refuse_unknown_names() -> None:
    assert parse_guides("none, prm,gprm,prm,gprm-no-point") == ["none", "prm", "gprm", "gprm-no-point"]
    with pytest.raises(ValueError, match="unknown guide variant gprm-no-brain; use some of: none, prm"):
        parse_guides("gprm,gprm-no-brain")
    assert shared_seed("exp-1") == shared_seed("exp-1") != shared_seed("exp-2")


def test_a_variant_keeps_the_runs_guide_settings_and_sets_its_own() -> None:
    cfg = load_run_config([PRESETS / "gprm-paper.yaml"])
    no_memory = apply_variant(cfg, "gprm-no-memory").guide
    assert no_memory.name == "gprm" and no_memory.candidates == 8 and no_memory.model == cfg.guide.model
    assert no_memory.options == {"memory_threshold": 5, "max_tool_calls": 2, "memory": False}
    prm = apply_variant(cfg, "prm").guide
    assert prm.name == "prm" and prm.options == {} and prm.candidates == 8
    assert apply_variant(cfg, "none").guide.name == "none"
    assert set(GUIDE_VARIANTS) >= {"none", "prm", "gprm", "gprm-no-memory", "gprm-no-tools", "gprm-no-point"}


def test_the_paper_preset_holds_the_papers_settings() -> None:
    guide = load_run_config([PRESETS / "gprm-paper.yaml"]).guide
    assert guide.name == "gprm" and guide.candidates == 8
    assert guide.seeds == [30, 42, 3407, 114514, 256, 64, 1024, 2]
    assert (guide.temperature, guide.top_p) == (0.5, 0.9)
    assert guide.model is not None and guide.model.model != load_run_config([PRESETS / "gprm-paper.yaml"]).policy.model
    assert guide.options["memory_threshold"] == 5 and guide.options["max_tool_calls"] == 2
    # The candidates' request carries the paper's 0.5 / 0.9 / top_k 80 (vLLM takes all three).
    cfg = load_run_config([PRESETS / "gprm-paper.yaml"])
    sent = sampling_params(resolve(cfg.policy.model), guided_config(cfg).worker.generate.merged(GenerateConfig(seed=30)))
    assert sent == {"temperature": 0.5, "top_p": 0.9, "top_k": 80, "seed": 30}


@structured
def _reply(request: ScriptRequest) -> str | Reply:
    system = next((m.text() for m in request.messages if m.role == "system"), "")
    if system.startswith("You are a process reward model"):
        return '<eval>{"score": 7, "reason": "on plan"}</eval>'
    if system.startswith("You gather visual evidence"):
        return json.dumps({"thought": "layout", "actions": [{"name": "ui_parser", "arguments": {}}]})
    if system.startswith("You keep the working memory"):
        return "[]"
    if system.startswith("You condense"):
        return "The agent worked on the file."
    return DEMO_PLANS[TASK](request)


@pytest.fixture
def model_url() -> Iterator[str]:
    with threaded_servers(OpenAIServer(Script("ablation-models", [_reply] * 2000), api_key=KEY)) as (url,):
        yield url


@pytest.mark.desktop
@pytest.mark.integration
@pytest.mark.timeout(600)
def test_bench_local_compares_guides_on_the_same_seed_and_writes_one_table(tmp_path: Path, model_url: str) -> None:
    reason = desktops_missing()
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path / "runs"
    command = [str(AGENT), "bench", "local", "--task", TASK, "--model", "openai/policy", "--base-url", model_url,
               "--settle", "0.2", "--out", str(out), "--run-id", "cmp", "--guides", "none,prm,gprm-no-memory",
               "-c", "guide.candidates=2", "-c", "label=scripted replies over HTTP"]
    env = {**os.environ, "OPENAI_API_KEY": KEY, "AGENT_S3_ENV_DIR": str(tmp_path / "envs"), "COLUMNS": "200"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=580, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    seed = shared_seed("cmp")
    for variant in ("none", "prm", "gprm-no-memory"):
        config = json.loads((out / f"cmp-{variant}" / "config.json").read_text())
        assert config["wide"]["seed"] == seed
        assert config["guide"]["name"] == ("none" if variant == "none" else variant.split("-")[0])
    guided = [json.loads(line) for line in (out / "cmp-prm" / TASK / "rollout-0" / "traj.jsonl").read_text().splitlines()
              if '"guide"' in line]
    assert guided and all(len(s["guide"]["candidates"]) == 2 for s in guided if s.get("guide"))
    table = (out / "cmp-guides.md").read_text()
    assert table.startswith("SCRIPTED")
    rows = json.loads((out / "cmp-guides.json").read_text())["rows"]
    assert [(r["variant"], r["difficulty"]) for r in rows if r["difficulty"] == "all"] == [
        ("none", "all"), ("prm", "all"), ("gprm-no-memory", "all")]
    for row in rows:
        assert row["tasks"] == 1 and row["success_rate"] == 1.0 and row["steps"] > 0
    prm_row = next(r for r in rows if r["variant"] == "prm" and r["difficulty"] == "all")
    assert "prm" in prm_row["dollars"] and "prm" not in next(r for r in rows if r["variant"] == "none")["dollars"]
    assert "| prm | all | 1 | 100.0% |" in table and "SCRIPTED" in done.stdout
