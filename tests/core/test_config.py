"""Layered configuration with an example root model (the real run config lives in runner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, Field, SecretStr

from core.config import REDACTED, ConfigError, dump_config, is_secret_key, load_config
from core.trajectory import RunLayout


class JudgeConfig(BaseModel):
    model: str = "openai/gpt-5-mini"
    temperature: float = 0.0
    api_key: SecretStr | None = None


class PolicyConfig(BaseModel):
    models: list[str] = Field(default_factory=lambda: ["openai/gpt-5"])
    max_steps: int = 50
    max_tokens: int = 4096


class CloudConfig(BaseModel):
    region: str = "us-east-1"
    secret_access_key: str = ""


class RunConfig(BaseModel):
    run_id: str = "run"
    rollouts: int = 1
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    critic: JudgeConfig | None = None
    cloud: CloudConfig = Field(default_factory=CloudConfig)
    headers: dict[str, str] = Field(default_factory=dict)


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(
        "rollouts: 4\n"
        "judge:\n  model: anthropic/claude-sonnet\n  temperature: 0.5\n"
        "policy:\n  models: [openai/gpt-5, anthropic/claude-sonnet]\n"
    )
    return path


def test_defaults_without_sources() -> None:
    assert load_config(RunConfig, []) == RunConfig()


def test_sources_apply_in_order(run_file: Path, tmp_path: Path) -> None:
    later = tmp_path / "later.yaml"
    later.write_text("judge:\n  temperature: 0.9\n")
    cfg = load_config(RunConfig, [str(run_file), "rollouts=10", "judge.model=openai/gpt-5", later])
    assert cfg.rollouts == 10
    assert cfg.judge.model == "openai/gpt-5"
    assert cfg.judge.temperature == 0.9  # later.yaml sets only the temperature; the model set before it stays
    assert cfg.policy.models == ["openai/gpt-5", "anthropic/claude-sonnet"]
    assert cfg.policy.max_steps == 50
    assert load_config(RunConfig, ["rollouts=10", str(run_file)]).rollouts == 4


def test_override_values_are_yaml(run_file: Path) -> None:
    cfg = load_config(RunConfig, [str(run_file), "policy.models=[a/b, c/d]", "judge.temperature=0.25"])
    assert cfg.policy.models == ["a/b", "c/d"]
    assert cfg.judge.temperature == 0.25
    cfg = load_config(RunConfig, ["critic={model: x/y, temperature: 1}", "headers.X-Team=blue"])
    assert cfg.critic == JudgeConfig(model="x/y", temperature=1.0)
    assert cfg.headers == {"X-Team": "blue"}


def test_string_fields_keep_the_text_yaml_would_retype() -> None:
    cfg = load_config(RunConfig, ["run_id=0012", "judge.model=yes", "critic.model=2024"])
    assert cfg.run_id == "0012" and cfg.judge.model == "yes"
    assert cfg.critic is not None and cfg.critic.model == "2024"


def test_mappings_in_code_are_a_source() -> None:
    assert load_config(RunConfig, [{"judge": {"temperature": 0.3}}, "rollouts=2"]).judge.temperature == 0.3


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "judge.modle=x",
            "unknown config key 'judge.modle' (from override judge.modle=x); valid keys in 'judge': api_key, model, temperature",
        ),
        (
            "rollout=3",
            "unknown config key 'rollout' (from override rollout=3); valid keys at the top level: cloud, critic, headers, judge, policy, rollouts, run_id",
        ),
        ("rollouts.count=3", "config key 'rollouts' is a single value, so 'rollouts.count' cannot be set"),
        ("critic.nope=1", "unknown config key 'critic.nope'"),
    ],
)
def test_unknown_keys_name_the_key_and_the_choices(source: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(RunConfig, [source])
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_key_in_a_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("policy:\n  max_step: 3\n")
    with pytest.raises(
        ConfigError,
        match=r"unknown config key 'policy.max_step' \(from .*bad.yaml\); valid keys in 'policy': max_steps, max_tokens, models",
    ):
        load_config(RunConfig, [path])


def test_bad_values_and_files_are_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"^invalid config: rollouts: Input should be a valid integer.*\(got 'many'\)$"
    ):
        load_config(RunConfig, ["rollouts=many"])
    with pytest.raises(ConfigError, match=r"config file .*missing\.yaml not found"):
        load_config(RunConfig, [str(tmp_path / "missing.yaml")])
    broken = tmp_path / "broken.yaml"
    broken.write_text("rollouts: 3\njudge: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken.yaml line \d+:"):
        load_config(RunConfig, [broken])
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(RunConfig, [listing])
    with pytest.raises(ConfigError, match="not a valid YAML"):
        load_config(RunConfig, ["policy.models=[a, b"])


def test_secret_values_never_appear_in_errors() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(RunConfig, ["judge.api_key=[sk-live-1234]"])
    assert "sk-live-1234" not in str(info.value) and REDACTED in str(info.value)
    with pytest.raises(ConfigError) as info:
        load_config(RunConfig, ["judge.nested.api_key=sk-live-5678"])
    assert "sk-live-5678" not in str(info.value) and "unknown config key 'judge.nested'" in str(info.value)


def test_dump_is_whole_and_redacted(run_file: Path) -> None:
    cfg = load_config(
        RunConfig,
        [
            str(run_file),
            "judge.api_key=sk-judge-secret",
            "cloud.secret_access_key=aws-secret",
            "headers.Authorization=Bearer abc",
            "headers.X-Team=blue",
        ],
    )
    dumped = dump_config(cfg)
    text = json.dumps(dumped)
    for secret in ("sk-judge-secret", "aws-secret", "Bearer abc"):
        assert secret not in text
    assert dumped["judge"]["api_key"] == REDACTED
    assert dumped["cloud"]["secret_access_key"] == REDACTED
    assert dumped["headers"] == {"Authorization": REDACTED, "X-Team": "blue"}
    assert dumped["policy"] == {
        "models": ["openai/gpt-5", "anthropic/claude-sonnet"],
        "max_steps": 50,
        "max_tokens": 4096,
    }
    assert dumped["critic"] is None and dumped["rollouts"] == 4


def test_a_run_rebuilds_from_its_config_json(run_file: Path, tmp_path: Path) -> None:
    cfg = load_config(RunConfig, [str(run_file), "rollouts=7", "judge.api_key=sk-judge-secret"])
    layout = RunLayout(tmp_path / "runs", "r1")
    layout.write_config(dump_config(cfg))
    rebuilt = load_config(RunConfig, [layout.config_path])
    # Everything but the secret comes back; the secret falls back to its default.
    assert rebuilt == cfg.model_copy(update={"judge": cfg.judge.model_copy(update={"api_key": None})})
    with_key = load_config(RunConfig, [layout.config_path, "judge.api_key=sk-again"])
    assert with_key.judge.api_key is not None and with_key.judge.api_key.get_secret_value() == "sk-again"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("api_key", True),
        ("OPENAI_API_KEY", True),
        ("apiKey", True),
        ("aws_secret_access_key", True),
        ("session_token", True),
        ("password", True),
        ("Authorization", True),
        ("max_tokens", False),
        ("prompt_tokens", False),
        ("model", False),
        ("key_frames", False),
    ],
)
def test_secret_key_names(name: str, secret: bool) -> None:
    assert is_secret_key(name) is secret
