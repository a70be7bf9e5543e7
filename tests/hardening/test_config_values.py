"""Configuration values that would switch a limit off or leak a secret."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from core.config import REDACTED, ConfigError, dump_config, redact_urls
from core.llm import ChatModel
from runner.config import load_run_config
from runner.mixture import MAX_ROLLOUTS, MixtureError, assign, parse_mixture


@pytest.mark.parametrize("value", ["nan", ".nan", "inf", ".inf", "-.inf", "-1", "0"])
@pytest.mark.parametrize(
    "key", ["policy.timeout", "environment.action_timeout", "rollout.max_wait_seconds", "wide.judge_model.timeout"]
)
def test_timeouts_must_be_finite_and_positive(key: str, value: str) -> None:
    sources = [f"{key}={value}"]
    if key.startswith("wide.judge_model"):
        sources.insert(0, "wide.judge_model.model=openai/gpt-5")
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_run_config(sources)


def test_other_numbers_must_be_finite_too() -> None:
    for override in ("rollout.settle_seconds=.inf", "rollout.cost_limit=.nan", "wide.temperature=.inf"):
        with pytest.raises(ConfigError, match="finite number"):
            load_run_config([override])


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://alice:s3cret@llm.example/v1", f"https://{REDACTED}@llm.example/v1"),
        ("http://sk-token@10.0.0.5:8000", f"http://{REDACTED}@10.0.0.5:8000"),
        ("calling https://u:p@h/v1 failed; retry at http://h2/v1", f"calling https://{REDACTED}@h/v1 failed; "
                                                                   "retry at http://h2/v1"),
        ("https://llm.example/v1?user=a@b", "https://llm.example/v1?user=a@b"),  # not user info
        ("mailto:someone@example.com", "mailto:someone@example.com"),
    ],
)
def test_redact_urls(text: str, shown: str) -> None:
    assert redact_urls(text) == shown


def test_url_credentials_never_reach_config_json_and_are_asked_for_again(tmp_path: Path) -> None:
    cfg = load_run_config([
        "policy.base_url=https://alice:s3cret@llm.example/v1",
        "environment.kind=osworld", "environment.url=http://bob:hunter2@10.0.0.9:5000",
        "wide.mixture=[{model: openai/a, base_url: 'https://carol:pw9@m.example'}]",
    ])
    dumped = json.dumps(dump_config(cfg))
    for secret in ("s3cret", "hunter2", "pw9", "alice", "bob", "carol"):
        assert secret not in dumped
    assert f"https://{REDACTED}@llm.example/v1" in dumped
    saved = tmp_path / "config.json"
    saved.write_text(dumped)
    with pytest.raises(ConfigError, match=r"'policy\.base_url' is a URL whose credentials were redacted"):
        load_run_config([saved])
    again = load_run_config([saved, "policy.base_url=https://alice:s3cret@llm.example/v1",
                             "environment.url=http://10.0.0.9:5000", "wide.mixture=openai/a*2"])
    assert again.policy.base_url == "https://alice:s3cret@llm.example/v1"
    assert "hunter2" not in cfg.environment.where()


def test_a_bad_override_value_does_not_echo_url_credentials() -> None:
    with pytest.raises(ConfigError) as caught:
        load_run_config(["environment.width=https://alice:s3cret@h/v1"])
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize("spec", ["openai/x*100000000", "openai/x*" + "9" * 400, f"a/b*{MAX_ROLLOUTS},c/d*1",
                                  [{"model": "a/b", "count": MAX_ROLLOUTS + 1}]])
def test_huge_mixtures_are_refused_when_read(spec: object) -> None:
    started = time.perf_counter()
    with pytest.raises(MixtureError) as caught:
        parse_mixture(spec)  # type: ignore[arg-type]
    assert time.perf_counter() - started < 0.5
    assert len(str(caught.value)) < 200 and "\n" not in str(caught.value)


def test_the_largest_mixture_and_rollout_count_still_work() -> None:
    entries = parse_mixture(f"a/b*{MAX_ROLLOUTS - 1},c/d")
    assert len(assign(entries, None, 0)) == MAX_ROLLOUTS
    with pytest.raises(MixtureError, match="at most"):
        assign(entries, MAX_ROLLOUTS + 1, 0)
    with pytest.raises(ConfigError, match="less than or equal to"):
        load_run_config([f"wide.rollouts={MAX_ROLLOUTS + 1}"])


def test_url_credentials_are_secrets_of_the_model_client() -> None:
    """What a model client scrubs from its records and errors includes a password (or a lone
    token) written into its base URL; its repr shows the URL redacted."""
    model = ChatModel.from_name("openai/x", base_url="https://alice:s3cr%40t@llm.example/v1", api_key="sk-1")
    assert {"s3cr@t", "s3cr%40t", "sk-1"} <= set(model.api.secrets()) and "alice" not in model.api.secrets()
    assert "s3cr" not in repr(model.api)
    token_only = ChatModel.from_name("openai/x", base_url="https://tok-123@llm.example/v1", api_key="sk-1")
    assert "tok-123" in token_only.api.secrets()
