"""How a run's coroutine is driven: on the clock its environment kind keeps (a simulated
fleet's virtual or scaled clock, else the wall clock; `core.clock`), with the run's rate
limits shared as it says (`core.llm.rate_budget`) and its simulated models' figures in place."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

from core import clock
from core.llm import UnknownProviderError, rate_budget
from core.llm.provider import provider_class, split_name
from core.llm.sim import configure as configure_sim_models
from core.trajectory import RunLayout
from environments.kinds import get_kind, settings_from

from .config import RunConfig
from .pricing import run_model_names

__all__ = ["run_async", "run_clock", "simulation_label", "with_simulation_label"]

T = TypeVar("T")


def run_async(cfg: RunConfig, main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` for a run of `cfg`."""
    spec = get_kind(cfg.environment.kind).clock_for(cfg.environment)
    configure_sim_models(cfg.sim_models)

    async def configured() -> T:
        rate_budget.configure(pacing=cfg.limits.pacing)
        return await main

    return clock.run(configured(), spec)


def run_clock(layout: RunLayout) -> clock.ClockSpec | None:
    """The clock a finished run kept (from its config.json), for commands that continue it
    offline (re-judging a simulated run's rollouts takes simulated time too)."""
    written = layout.read_config() or {}
    try:
        settings = settings_from(written.get("environment") or {})
    except (ValueError, KeyError):
        return None
    return get_kind(settings.kind).clock_for(settings)


def simulation_label(cfg: RunConfig) -> str | None:
    """What a run of `cfg` simulates, as its label says it (None: nothing is simulated):
    environments whose kind keeps a simulated clock, and models whose provider says so."""
    notes: list[str] = []
    spec = get_kind(cfg.environment.kind).clock_for(cfg.environment)
    if spec is not None:
        notes.append(f"SIMULATED environments ({cfg.environment.where()}; {spec.describe()})")
    for name in run_model_names(cfg):
        try:
            said = getattr(provider_class(split_name(name)[0]), "label", None)
        except UnknownProviderError:
            continue
        if said and said not in notes:
            notes.append(said)
    return "; ".join(notes) or None


def with_simulation_label(cfg: RunConfig) -> RunConfig:
    """`cfg` with its label saying what it simulates (kept in config.json and every rollout.json)."""
    said = simulation_label(cfg)
    if said is None or (cfg.label and said in cfg.label):
        return cfg
    return cfg.model_copy(update={"label": f"{cfg.label}; {said}" if cfg.label else said})
