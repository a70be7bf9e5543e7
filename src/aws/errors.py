"""What the fleet raises on purpose; each message ends with what to do."""

from __future__ import annotations

from .costs import CostCapReached

__all__ = ["CostCapReached", "FleetCapReached", "FleetClosed", "FleetError", "PortsBlocked", "UnhealthyDesktop"]


class FleetError(RuntimeError):
    """Base of the fleet's own errors (the cost cap's is a sibling, also a RuntimeError)."""


class FleetCapReached(FleetError):
    """A launch was refused because the fleet already holds `max_instances` instances."""


class FleetClosed(FleetError):
    """The fleet is shutting down (exit, Ctrl-C, SIGTERM) and launches nothing more."""


class UnhealthyDesktop(FleetError):
    """No instance of a desktop became healthy within the allowed attempts."""


class PortsBlocked(FleetError):
    """A port the fleet requires cannot be reached on a running, healthy instance: every
    instance of the fleet shares that network, so no replacement would do better."""
