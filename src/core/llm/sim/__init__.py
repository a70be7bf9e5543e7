"""Simulated models (``sim/<provider>/<model>``): see `core.llm.sim.provider`."""

from .config import AccountLimits, ModuleFigures, SimModels, configure, sim_models
from .limits import ProviderLimiter, limiter_for
from .provider import SIM_LABEL, SimAPI, SimRequest, set_responder

__all__ = ["SIM_LABEL", "AccountLimits", "ModuleFigures", "ProviderLimiter", "SimAPI", "SimModels", "SimRequest",
           "configure", "limiter_for", "set_responder", "sim_models"]
