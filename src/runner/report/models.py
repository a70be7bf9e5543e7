"""Which model each module used: as configured (config.json) and as called (the ledger).

Both are shown because they answer different questions: the configuration says what the
run was meant to use (with the fallbacks `RunConfig` documents resolved, e.g. a narrator
left unset narrates with the judge's model), the ledger what really answered, which also
covers later offline passes such as ``agent-s3 judge`` with another judge.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.registry import UnknownName

from ..strategies import STRATEGIES

__all__ = ["MODEL_ROLES", "ModuleModels", "module_models"]

#: The modules a reader asks about, in the order the report lists them.
MODEL_ROLES = ("policy", "grounding", "code_agent", "reflection", "narrator", "judge", "guide", "critic")

#: Ledger module names that belong to a role under another name.
_LEDGER_ROLE = {"narrative": "narrator", "prm": "guide", "code_summary": "code_agent"}


@dataclass
class ModuleModels:
    role: str
    configured: str | None
    """``provider/model`` the configuration gives this module (a mixture for a wide run's
    policy); None when the run does not use the module."""
    inherited_from: str | None = None
    """The module whose model this one uses because its own is unset."""
    called: dict[str, int] = field(default_factory=dict)
    """Model name to calls made by this module, from the ledger."""


def _name(section: Any) -> str | None:
    if isinstance(section, dict) and isinstance(section.get("model"), str):
        return str(section["model"])
    return None


def _section(config: dict[str, Any], key: str) -> dict[str, Any]:
    value = config.get(key)
    return value if isinstance(value, dict) else {}


def _mixture(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for entry in value:
            if isinstance(entry, dict) and isinstance(entry.get("model"), str):
                count = entry.get("count", 1)
                parts.append(f"{entry['model']}*{count}")
        return ",".join(parts) or None
    return None


class _Unknown:
    """What a run made by a strategy this installation cannot import is read as: one rollout
    per task, no model roles beyond the worker's."""

    roles: tuple[str, ...] = ()
    samples_mixture = False


def _strategy(name: Any) -> Any:
    """The class of the strategy the run's configuration names (it says which roles it calls)."""
    try:
        return STRATEGIES.get(name if isinstance(name, str) else "single")
    except UnknownName:
        return _Unknown


def _configured(config: dict[str, Any]) -> dict[str, tuple[str | None, str | None]]:
    """Role to (model, role it is inherited from) by `RunConfig`'s fallbacks."""
    policy = _name(config.get("policy"))
    worker, wide, guide, critic = (_section(config, key) for key in ("worker", "wide", "guide", "critic"))
    strategy = _strategy(config.get("strategy"))
    out: dict[str, tuple[str | None, str | None]] = {}

    def own_or(role: str, section: Any, fallback: str | None, source: str, used: bool = True) -> None:
        if not used:
            out[role] = (None, None)
        elif (own := _name(section)) is not None:
            out[role] = (own, None)
        else:
            out[role] = (fallback, source if fallback is not None else None)

    mixture = _mixture(wide.get("mixture")) if strategy.samples_mixture else None
    out["policy"] = (mixture or policy, None)
    own_or("grounding", config.get("grounding"), policy, "policy")
    own_or("code_agent", config.get("code_model"), policy, "policy", bool(worker.get("code_agent", True)))
    own_or("reflection", config.get("reflection_model"), policy, "policy", bool(worker.get("reflection", True)))
    own_or("judge", wide.get("judge_model"), policy, "policy", "judge" in strategy.roles)
    judge = out["judge"][0]
    own_or("narrator", wide.get("narrator_model"), judge, "judge", "narrator" in strategy.roles)
    own_or("guide", guide.get("model"), policy, "policy", guide.get("name", "none") != "none")
    own_or("critic", critic.get("model"), policy, "policy", "critic" in strategy.roles)
    return out


def module_models(config: dict[str, Any], called: Mapping[tuple[str, str], int]) -> list[ModuleModels]:
    """One row per role that is configured or was called (`called`: the ledger's calls per
    module and model), in `MODEL_ROLES` order (ledger modules of no known role follow by name)."""
    configured = _configured(config) if config else {}
    by_role: dict[str, Counter[str]] = {}
    for (module, name), count in called.items():
        role = _LEDGER_ROLE.get(module, module)
        by_role.setdefault(role, Counter())[name] += count
    roles = [r for r in MODEL_ROLES if configured.get(r, (None, None))[0] or r in by_role]
    roles += sorted(r for r in by_role if r not in MODEL_ROLES)
    rows = []
    for role in roles:
        model, source = configured.get(role, (None, None))
        rows.append(ModuleModels(role=role, configured=model, inherited_from=source,
                                 called=dict(by_role.get(role, Counter()).most_common())))
    return rows
