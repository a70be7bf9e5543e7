"""Prices of a run's models, checked before anything starts.

A model without a price counts its calls as $0, so a run with one is said once, up front;
`rollout.cost_limit` cannot be kept on a model whose cost is unknown, so such a run is
refused unless the configuration's ``prices:`` gives that model a price.
"""

from __future__ import annotations

from core.config import ConfigError
from core.llm import unpriced_models

from .config import RunConfig
from .mixture import parse_mixture
from .strategy import strategy_class

__all__ = ["check_prices", "run_model_names", "unpriced_line"]


def run_model_names(cfg: RunConfig) -> list[str]:
    """Every ``provider/model`` the run would call, once each, in the order of its roles."""
    names = [cfg.policy.model]
    for section in (cfg.grounding, cfg.code_model, cfg.reflection_model):
        if section is not None:
            names.append(section.model)
    if cfg.guide.name != "none":
        names += [m.model for m in (cfg.guide.model, cfg.guide.pointer) if m is not None]
    strategy = strategy_class(cfg)
    if "critic" in strategy.roles and cfg.critic.model is not None:
        names.append(cfg.critic.model.model)
    if strategy.samples_mixture:
        names += [entry.model for entry in parse_mixture(cfg.wide.mixture)]
    if "judge" in strategy.roles and cfg.wide.judge != "none":
        names += [m.model for m in (cfg.wide.judge_model, cfg.wide.narrator_model) if m is not None]
    return list(dict.fromkeys(names))


def check_prices(cfg: RunConfig) -> list[str]:
    """The run's models with no price (to be said once); raises `ConfigError` when
    `rollout.cost_limit` is set and any of them has none."""
    missing = unpriced_models(run_model_names(cfg), cfg.prices)
    if missing and cfg.rollout.cost_limit is not None:
        first = missing[0]
        raise ConfigError(
            f"rollout.cost_limit needs a price for every model, and {', '.join(missing)} "
            f"{'has' if len(missing) == 1 else 'have'} none: give one in the config, e.g. "
            f"-c 'prices={{\"{first}\": {{\"input\": 0.5, \"output\": 1.5}}}}' (dollars per "
            f"million tokens), or drop rollout.cost_limit"
        )
    return missing


def unpriced_line(missing: list[str]) -> str:
    """The one warning line about models without a price."""
    return (f"no price known for {', '.join(missing)}: {'its' if len(missing) == 1 else 'their'} calls "
            f"count as $0 (set prices.<model> in the config to count them)")
