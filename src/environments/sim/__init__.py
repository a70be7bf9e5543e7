"""A simulated fleet (the ``sim`` environment kind): see `environments.sim.kind`."""

from .environment import GOAL_MARK, SIM_NOTE, SimEnvironment
from .fleet import FleetStats, SimFleet
from .profile import FleetProfile, load_profile
from .screen import SIM_SCREEN_SIZE, screen_png

__all__ = ["GOAL_MARK", "SIM_NOTE", "SIM_SCREEN_SIZE", "FleetProfile", "FleetStats", "SimEnvironment", "SimFleet",
           "load_profile", "screen_png"]
