import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from jinja2 import UndefinedError

from core.prompts import PromptTemplates


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A throwaway importable package with a prompts/ folder."""
    root = tmp_path / "promptpkg"
    (root / "prompts").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "prompts" / "ask.j2").write_text("Goal: {{ goal }}\n")
    (root / "prompts" / "ask_mobile.j2").write_text("Phone goal: {{ goal }}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield root
    sys.modules.pop("promptpkg", None)


def test_renders_strictly(package: Path) -> None:
    templates = PromptTemplates("promptpkg")
    assert templates.render("ask", goal="save") == "Goal: save"
    with pytest.raises(UndefinedError):
        templates.render("ask")


def test_variant_chosen_only_for_its_value(package: Path) -> None:
    templates = PromptTemplates("promptpkg", variant_key="platform", variants={"Android": "mobile"})
    assert templates.render("ask", goal="x", platform="Android") == "Phone goal: x"
    assert templates.render("ask", goal="x", platform="Ubuntu") == "Goal: x"


def test_version_follows_the_text_of_the_template_and_its_variants(package: Path) -> None:
    def version() -> str:
        return PromptTemplates("promptpkg", variant_key="platform", variants={"Android": "mobile"}).version("ask")

    first = version()
    assert first == version()
    (package / "prompts" / "ask_mobile.j2").write_text("Phone goal now: {{ goal }}\n")
    second = version()
    assert second != first
    (package / "prompts" / "ask.j2").write_text("Goal now: {{ goal }}\n")
    assert version() not in (first, second)


def test_the_worker_uses_its_mobile_prompt_on_android() -> None:
    from agent_s3.prompts import TEMPLATES

    assert TEMPLATES.resolve("worker_system", {"platform_name": "Android"}) == "worker_system_mobile.j2"
    assert TEMPLATES.resolve("worker_system", {"platform_name": "Ubuntu"}) == "worker_system.j2"
