"""A desktop slot of the fleet (the instance behind it changes on revert) and the fleet's counts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .config import FleetConfig
from .errors import FleetError
from .tags import InstanceRecord

__all__ = ["AddressResolver", "FleetStats", "Machine", "server_address"]

#: Maps an instance to the base URL of its in-VM server (tests point it at loopback).
AddressResolver = Callable[[InstanceRecord], str]


def server_address(cfg: FleetConfig) -> AddressResolver:
    """``http://<private ip>:<port>`` (or the public IP when `cfg.public_ip`)."""

    def resolve(instance: InstanceRecord) -> str:
        ip = instance.public_ip if cfg.public_ip else instance.private_ip
        if not ip:
            kind = "public" if cfg.public_ip else "private"
            raise FleetError(
                f"instance {instance.id} has no {kind} IP address: "
                + ("launch it in a subnet that assigns public IPs" if cfg.public_ip else "check its subnet")
            )
        return f"http://{ip}:{cfg.server_port}"

    return resolve


@dataclass
class Machine:
    """One desktop: the labels it was asked for and the healthy instance now behind it."""

    name: str
    task: str = ""
    rollout: int | None = None
    instance: InstanceRecord | None = None
    url: str | None = None
    #: Set once anything may have changed the desktop; a revert of an unused one is skipped.
    used: bool = False
    #: Instances launched for this desktop so far (replacements and reverts included).
    launches: int = 0

    def mark_used(self) -> None:
        self.used = True

    @property
    def instance_id(self) -> str | None:
        return self.instance.id if self.instance is not None else None


@dataclass
class FleetStats:
    """What happened to the fleet's instances, for reports and tests."""

    launched: int = 0
    terminated: int = 0
    #: Instances that ran but whose server never answered in time (terminated, replaced).
    unhealthy: int = 0
    #: Instances that never reached `running` (terminated, replaced).
    failed_to_start: int = 0
    reverts: int = 0
    reverts_skipped: int = 0
