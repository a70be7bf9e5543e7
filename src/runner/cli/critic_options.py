"""What the critic commands share: their options, the critic's model and its options
(``critic``, ``filter`` in `runner.cli.critic`; ``critic-bench`` in `runner.cli.critic_bench`);
errors go the one way every command's do (`runner.cli.errors.fail`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from core.config import ConfigError, load_config
from core.llm import ChatModel, Ledger, MissingAPIKeyError, ScriptError, UnknownProviderError, is_scripted
from core.trajectory import RunLayout
from themis import CRITICS, Critic, critic_options_model, make_critic

from ..config import ModelConfig
from ..models import chat_model
from .errors import fail

__all__ = [
    "BaseUrl",
    "Concurrency",
    "CriticName",
    "ModelName",
    "OptionList",
    "OptionsFile",
    "critic_options",
    "make_critic_for",
    "run_model",
]

CriticName = Annotated[str, typer.Option("--critic", help=CRITICS.help("Which critic: "))]
ModelName = Annotated[str | None, typer.Option("--model", "-m", help="The critic's model as provider/model "
                                               "(default: the run's critic or policy model).")]
BaseUrl = Annotated[str | None, typer.Option("--base-url", help="Endpoint of the critic model's server.")]
Concurrency = Annotated[int, typer.Option("--concurrency", "-j", min=1, help="Rollouts graded at once.")]
OptionList = Annotated[list[str] | None, typer.Option("--option", help="A critic option as key=value "
                       "(dotted keys for nested ones: decoding.verifier.temperature=0.7, models.judge=openai/gpt-4o; "
                       "ablations: selector=false, verifier=false, reviewer=off|advisor, judge=false, "
                       "assignment_goals=false; voting: votes=3 vote=majority|all|any); repeatable.")]
OptionsFile = Annotated[Path | None, typer.Option("--options", help="A YAML file of critic options (applied "
                        "before each --option).")]


def run_model(layout: RunLayout, model: str | None, base_url: str | None) -> ModelConfig:
    """The critic's model: as given, else the one the run's configuration names."""
    if model is not None:
        return ModelConfig(model=model, base_url=base_url)
    cfg = layout.read_config() or {}
    for section in ((cfg.get("critic") or {}).get("model"), cfg.get("policy")):
        if isinstance(section, dict) and isinstance(section.get("model"), str):
            if is_scripted(section["model"]):
                break  # a scripted policy cannot judge anything
            return ModelConfig(model=section["model"], base_url=base_url or section.get("base_url"))
    raise fail("name the critic's model with --model provider/model (the run's configuration names none usable)")


def critic_options(name: str, option: list[str] | None, options_file: Path | None) -> dict[str, Any]:
    """The critic's options from ``--options FILE`` then each ``--option key=value``."""
    try:
        options_model = critic_options_model(name)
    except ValueError as e:
        raise fail(str(e)) from None
    sources: list[str | Path] = [*([options_file] if options_file is not None else []), *(option or [])]
    if not sources:
        return {}
    for text in option or []:
        if "=" not in text:
            raise fail(f"--option {text!r}: write key=value, e.g. --option verifier=false")
    try:
        parsed = load_config(options_model, sources)
    except (ConfigError, OSError) as e:
        raise fail(f"critic {name!r} options: {e}") from None
    return parsed.model_dump(exclude_defaults=True)


def _build(cfg: ModelConfig, ledger: Ledger) -> ChatModel:
    try:
        return chat_model(cfg, ledger)
    except MissingAPIKeyError as e:
        raise fail(f"the critic's model {cfg.model} needs an API key: set {e.variable}") from None
    except (UnknownProviderError, ScriptError) as e:
        raise fail(str(e)) from None


def make_critic_for(name: str, cfg: ModelConfig, ledger: Ledger, options: dict[str, Any] | None = None,
          **tags: str) -> tuple[Critic, list[ChatModel]]:
    """The critic and every model it owns (its own, then per-role ones, to close after).

    A role's model (``--option models.<role>=provider/model``) talks to ``--base-url`` when
    it has the critic model's provider, else to its provider's default endpoint."""
    options = dict(options or {})
    model = _build(cfg, ledger)
    owned = [model]
    roles: dict[str, ChatModel] = {}
    provider = cfg.model.split("/", 1)[0]
    for role, role_name in (options.get("models") or {}).items():
        if role_name == cfg.model:
            continue
        same = role_name.split("/", 1)[0] == provider
        built = _build(ModelConfig(model=role_name, base_url=cfg.base_url if same else None), ledger)
        owned.append(built)
        roles[role] = built.with_tags(**tags) if tags else built
    try:
        critic = make_critic(name, model.with_tags(**tags) if tags else model,
                             **({"role_models": roles} if roles else {}), **options)
    except ValueError as e:
        raise fail(str(e)) from None
    return critic, owned
