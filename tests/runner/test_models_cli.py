"""`agent-s3 models check`: resolution without keys; with keys, one request per model with
the run's exact settings, over HTTP through the official SDKs to the strict local servers;
`run` refuses a retired model or a refused setting before any environment starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from runner_helpers import threaded_servers
from typer.testing import CliRunner

from bjudge import FactsReply
from core.llm import ImagePart, Reply, Sampling, Script, ScriptRequest
from core.llm.limits import ANSWER_TOKENS, THINKING_ROOM
from core.llm.profiles import OVERRIDES_ENV
from gprm import PAPER_SEEDS
from runner.cli import app
from runner.cli.models import ping_messages, planned_uses
from runner.config import load_run_config
from runner.pricing import run_model_names
from testing.llm import AnthropicServer, OpenAIServer

KEY = "sk-models-check-0123456789"
PRESETS = Path(__file__).parents[2] / "presets"


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", OVERRIDES_ENV):
        monkeypatch.delenv(name, raising=False)


def test_every_role_of_a_run_is_planned_with_its_settings() -> None:
    cfg = load_run_config([{"strategy": "wide", "wide": {"mixture": "openai/gpt-6.1-sol*2,anthropic/claude-sonnet-5-5*3"},
                            "guide": {"name": "gprm", "model": {"model": "anthropic/claude-haiku-4-5"}}}])
    uses = planned_uses(cfg)
    roles = [(u.role, u.name) for u in uses]
    assert roles[:2] == [("policy x2", "openai/gpt-6.1-sol"), ("policy x3", "anthropic/claude-sonnet-5-5")]
    assert ("grounding", "anthropic/claude-sonnet-5-5") in roles and ("reflection", "openai/gpt-6.1-sol") in roles
    assert ("guide", "anthropic/claude-haiku-4-5") in roles and roles[-2:] == [
        ("narrator", cfg.policy.model), ("judge", cfg.policy.model)]
    policy = uses[0].config  # guided candidates: GUI-PRA's sampling where accepted, its first seed
    assert policy.sampling == Sampling.diverse(0.5, 0.9, 80) and policy.seed == PAPER_SEEDS[0]
    plain = planned_uses(load_run_config([{"strategy": "wide", "wide": {"mixture": "openai/gpt-4.1*2"}}]))
    assert plain[0].config.sampling == Sampling.diverse(1.0) and plain[0].config.seed is not None
    assert next(u for u in uses if u.role == "guide").config.sampling.intent == "deterministic"  # type: ignore[union-attr]


def test_without_keys_it_resolves_and_prints_profiles_and_prices() -> None:
    result = CliRunner().invoke(app, ["models", "check", "--model", "openai/gpt-5.2", "--critic", "themis",
                                      "--critic-model", "anthropic/claude-sonnet-5-5"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "policy openai/gpt-5.2: gpt-5.x: temperature 1 only" in out
    assert "critic (themis) anthropic/claude-sonnet-5-5: claude-5.x: no temperature" in out
    assert "price:" in out and "source: anthropic-version 2026-10-21:" in out
    assert "not called: no key (OPENAI_API_KEY unset)" in out
    assert "not called: no key (ANTHROPIC_API_KEY unset)" in out


def test_a_refused_setting_or_retired_model_fails_the_check_without_a_request() -> None:
    result = CliRunner().invoke(app, ["models", "check", "--mixture", "openai/gpt-5*2,anthropic/claude-opus-4-1",
                                      "-c", "guide.name=gprm", "-c", "guide.top_p=0.9"])
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    assert "refused: openai/gpt-5: top_p 0.9 is not accepted (this model takes no top_p)" in out
    assert "refused: anthropic/claude-opus-4-1: the model is retired; use claude-sonnet-5-5" in out


#: A reply in each contract a role's check asks in (any values, as the check says).
SAMPLES = {
    "JudgeReply": {"decision": "completed", "reason": "ok", "missing": [], "key_steps": [], "evidence": [],
                   "failure_window": None, "qa": {"is_qa": False, "final_answer": "", "answer_ok": None,
                                                  "compliance": None, "notes": ""}},
    "ScoreReply": {"score": 5, "reason": "ok", "original_step": "ok"},
    "FactsReply": {"thoughts": "ok", "facts": ["ok"]},
    "AnswerReply": {"thoughts": "ok", "answer": 1},
}


def check_reply(request: ScriptRequest) -> str:
    """"ok", or a sample object when the check asked in a contract (found by its properties)."""
    fmt = request.config.reply_format
    if fmt is None:
        return "ok"
    keys = set(fmt.json_schema["properties"])
    return json.dumps(next(v for v in SAMPLES.values() if set(v) == keys))


def test_with_keys_one_request_per_model_with_the_runs_settings(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    openai_server = OpenAIServer(Script("check-openai", [check_reply] * 10), api_key=KEY)
    claude_server = AnthropicServer(Script("check-claude", [check_reply] * 10), api_key=KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with threaded_servers(openai_server, claude_server) as (openai_url, claude_url):  # type: ignore[arg-type]
        run = {
            "policy": {"model": "openai/gpt-5.2", "base_url": openai_url,
                       "generate": {"reasoning_effort": "low", "max_tokens": 2000}},
            "guide": {"name": "gprm", "model": {"model": "anthropic/claude-haiku-4-5", "base_url": claude_url}},
            "strategy": "retry",
            "critic": {"model": {"model": "anthropic/claude-opus-5-5", "base_url": claude_url}},
        }
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(run))
        result = CliRunner().invoke(app, ["models", "check", "-c", str(path)])
    assert result.exit_code == 0, result.output
    assert openai_server.refused == [] and claude_server.refused == []
    policy = openai_server.requests[0].body
    # The candidates' diverse intent on a reasoning model: no temperature or top_p, the first
    # candidate's seed, the run's effort and token field.
    assert policy["reasoning_effort"] == "low" and policy["max_completion_tokens"] == 2000
    assert policy["seed"] == PAPER_SEEDS[0]
    assert "temperature" not in policy and "top_p" not in policy
    guide, critic = (r.body for r in claude_server.requests)
    assert guide["model"] == "claude-haiku-4-5" and not {"temperature", "top_p"} & set(guide)
    # Each role's check is what the role sends: the guide's score and the critic's verdict in
    # their schemas (Claude's structured outputs), a screenshot with each, the role's limit.
    assert guide["output_config"]["format"]["schema"]["required"] == ["score", "reason", "original_step"]
    assert critic["model"] == "claude-opus-5-5" and "decision" in critic["output_config"]["format"]["schema"]["properties"]
    assert critic["max_tokens"] == ANSWER_TOKENS["critic"] + THINKING_ROOM["medium"]  # Opus 5.5 thinks at medium
    assert all(any(b.get("type") == "image" for b in body["messages"][0]["content"]) for body in (guide, critic))
    assert all(r.credential == KEY for r in openai_server.requests + claude_server.requests)
    assert "ok in" in result.output and KEY not in result.output
    assert "with a screenshot, structured" in " ".join(result.output.split())


def test_run_refuses_a_retired_model_before_any_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    result = CliRunner().invoke(app, ["run", "--task", "Open the terminal", "--model", "anthropic/claude-opus-4-1",
                                      "--env", "osworld", "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 2
    assert "anthropic/claude-opus-4-1: the model is retired; use claude-sonnet-5-5" in result.output


def test_the_runs_price_overrides_are_the_prices_shown(tmp_path: Path) -> None:
    """A `prices:` entry prices a model genai-prices does not list and wins over a list price;
    what `models check` prints is what the run's ledger would charge."""
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({
        "policy": {"model": "vllm/qwen3-vl-32b", "base_url": "http://127.0.0.1:9/v1"},
        "strategy": "retry", "critic": {"model": {"model": "openai/gpt-5.2"}},
        "prices": {"vllm/qwen3-vl-32b": {"input": 0.25, "output": 1.5}}}))
    result = CliRunner().invoke(app, ["models", "check", "-c", str(path), "--no-call"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "price: $0.25 in / $1.5 out per Mtok (the run's prices:)" in out
    listed = CliRunner().invoke(app, ["models", "check", "--model", "openai/gpt-5.2", "--no-call"])
    list_price = " ".join(listed.output.split()).split("price: ")[1].split(" per Mtok")[0]
    assert list_price.startswith("$") and list_price != "$9 in / $99 out"
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({"policy": {"model": "openai/gpt-5.2"},
                                    "prices": {"openai/gpt-5.2": {"input": 9, "output": 99}}}))
    overridden = CliRunner().invoke(app, ["models", "check", "-c", str(over), "--no-call"])
    assert "price: $9 in / $99 out per Mtok (the run's prices:)" in " ".join(overridden.output.split())
    bare = CliRunner().invoke(app, ["models", "check", "--model", "vllm/qwen3-vl-32b", "--no-call"])
    assert "no known price (give one under prices: in the run config)" in " ".join(bare.output.split())


def test_the_narrator_is_a_role_of_its_own_in_the_check_and_the_price_preflight() -> None:
    """The s3-osworld preset narrates with Claude and judges with GPT: both are resolved,
    priced and checked as what they send (the narrator a screenshot and its facts' schema,
    the judge its answer's schema and no screenshot)."""
    cfg = load_run_config([str(PRESETS / "s3-osworld.yaml")])
    uses = {u.role: u for u in planned_uses(cfg)}
    narrator, judge = uses["narrator"], uses["judge"]
    assert narrator.name == cfg.wide.narrator_model.model and narrator.name.startswith("anthropic/")  # type: ignore[union-attr]
    assert judge.name == cfg.wide.judge_model.model and judge.name != narrator.name  # type: ignore[union-attr]
    assert (narrator.module, narrator.image, narrator.contract) == ("narrative", True, FactsReply)
    assert (judge.module, judge.image) == ("judge", False) and judge.contract is not None
    assert narrator.name in run_model_names(cfg) and judge.name in run_model_names(cfg)
    assert [m.role for m in ping_messages(narrator)] == ["user"]
    assert any(isinstance(p, ImagePart) for p in ping_messages(narrator)[0].parts())
    assert not any(isinstance(p, ImagePart) for p in ping_messages(judge)[0].parts())


def test_a_server_that_refuses_images_fails_the_check_of_the_roles_that_see_screens(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A local OpenAI-compatible server that answers 500 to every request with an image (as a
    text-only llama.cpp build does): the policy's check carries a screenshot and fails, in
    one line; the text-only judge's passes."""

    def no_images(request: ScriptRequest) -> str | Reply:
        if any(isinstance(p, ImagePart) for m in request.messages for p in m.parts()):
            return Reply(error=500, fault="html")
        return check_reply(request)

    server = OpenAIServer(Script("no-images", [no_images] * 40), api_key=KEY, provider="vllm")
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    with threaded_servers(server) as (url,):  # type: ignore[arg-type]
        result = CliRunner().invoke(app, ["models", "check", "--model", "vllm/qwen3-vl", "-c", f"policy.base_url={url}",
                                          "-c", "strategy=wide", "--judge", "bjudge",
                                          "-c", "worker.code_agent=false", "-c", "worker.reflection=false"])
    out = result.output
    assert result.exit_code == 1, out
    lines = [line for line in out.splitlines() if "request:" in line]
    assert any("FAILED" in line and "HTTP 500" in line and "(an HTML page)" in line for line in lines), out
    assert "<html" not in out and any(line.strip().startswith("request: ok") for line in lines), out
