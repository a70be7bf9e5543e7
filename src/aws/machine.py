"""A desktop slot of the fleet (the instance behind it changes on revert) and the fleet's counts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .address import fill_connect_via, needs_ip
from .config import FleetConfig
from .errors import FleetError
from .tags import InstanceRecord

__all__ = ["AddressResolver", "FleetStats", "Machine", "server_address"]

#: Maps an instance to the base URL of its in-VM server.
AddressResolver = Callable[[InstanceRecord], str]


def server_address(cfg: FleetConfig) -> AddressResolver:
    """``http://<private ip>:<port>`` (or the public IP when `cfg.public_ip`), or the
    instance's `cfg.connect_via` URL when set."""

    def resolve(instance: InstanceRecord) -> str:
        ip = instance.public_ip if cfg.public_ip else instance.private_ip
        wanted = needs_ip(cfg.connect_via) if cfg.connect_via else {"ip"}
        missing = [name for name, value in (("ip", ip), ("private_ip", instance.private_ip),
                                            ("public_ip", instance.public_ip)) if name in wanted and not value]
        if missing:
            kind = "public" if "public_ip" in missing or (missing == ["ip"] and cfg.public_ip) else "private"
            raise FleetError(
                f"instance {instance.id} has no {kind} IP address: "
                + ("launch it in a subnet that assigns public IPs" if kind == "public" else "check its subnet")
            )
        if cfg.connect_via:
            return fill_connect_via(cfg.connect_via, {
                "instance_id": instance.id, "private_ip": instance.private_ip or "",
                "public_ip": instance.public_ip or "", "ip": ip or "", "port": str(cfg.server_port),
            })
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
