"""`core.llm.is_scripted`, the one test behind every SCRIPTED mark and every refusal to let
scripted replies stand in as a critic, guide or judge; and an unknown provider refused with
the providers there are."""

from __future__ import annotations

import pytest

from core.llm import PROVIDERS, ChatModel, UnknownProviderError, is_scripted


@pytest.mark.parametrize(("model", "label", "expected"), [
    ("scripted/demo", None, True),
    ("replay/runs/r1/ledger.jsonl", None, True),
    ("openai/gpt-6.1-sol", None, False),
    ("openai/scripted-looking-name", None, False),  # the provider decides, not a substring
    ("scripted", None, False),  # no model part: not a model name at all
    (None, None, False),
    ("openai/gpt-6.1-sol", "SCRIPTED demo narrator and judge", True),  # a run labelled scripted
    ("openai/gpt-6.1-sol", "baseline, 50 steps", False),
])
def test_scripted_replies_are_told_by_provider_or_label(model: str | None, label: str | None, expected: bool) -> None:
    assert is_scripted(model, label) is expected


def test_an_unknown_provider_names_the_providers_and_the_dotted_form() -> None:
    with pytest.raises(UnknownProviderError) as caught:
        ChatModel.from_name("nosuch/model-x")
    message = str(caught.value)
    assert "unknown model provider 'nosuch'" in message and "package.module:Class" in message
    assert all(name in message for name in ("openai", "anthropic", "scripted"))
    assert "openai" in PROVIDERS.names()
