"""A desktop slot of the fleet (the instance behind it changes on revert) and the fleet's counts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .address import Reach, fill, needs_ip
from .config import FleetConfig
from .errors import FleetError
from .tags import InstanceRecord

__all__ = ["AddressResolver", "FleetStats", "Machine", "server_address"]

#: Maps an instance to where the host reaches its ports.
AddressResolver = Callable[[InstanceRecord], Reach]


def server_address(cfg: FleetConfig) -> AddressResolver:
    """The instance's private IP (or public, with `cfg.public_ip`) and its ports, or where
    `cfg.connect_via` says each port is reached."""

    def resolve(instance: InstanceRecord) -> Reach:
        ip = instance.public_ip if cfg.public_ip else instance.private_ip
        wanted = needs_ip(cfg.connect_via) if cfg.connect_via is not None else {"ip"}
        missing = [name for name, value in (("ip", ip), ("private_ip", instance.private_ip),
                                            ("public_ip", instance.public_ip)) if name in wanted and not value]
        if missing:
            kind = "public" if "public_ip" in missing or (missing == ["ip"] and cfg.public_ip) else "private"
            raise FleetError(
                f"instance {instance.id} has no {kind} IP address: "
                + ("launch it in a subnet that assigns public IPs (assign_public_ip)" if kind == "public"
                   else "check its subnet")
            )
        offered = {name: port for name, port in cfg.ports.items() if port is not None}
        if cfg.connect_via is None:
            assert ip is not None
            return Reach(host=ip, ports=offered, direct=True)
        values = {"instance_id": instance.id, "private_ip": instance.private_ip or "",
                  "public_ip": instance.public_ip or "", "ip": ip or ""}
        templates = cfg.connect_via if isinstance(cfg.connect_via, dict) else dict.fromkeys(offered, cfg.connect_via)
        urls = {name: fill(t, {**values, "port": str(offered[name])}) for name, t in templates.items() if name in offered}
        hosts = {u.host for u in urls.values()}
        if len(hosts) != 1:
            raise FleetError(f"connect_via reaches {instance.id} on several hosts ({', '.join(sorted(hosts))}): "
                             f"OSWorld's controllers take one address for all ports")
        return Reach(host=hosts.pop(), ports={n: u.port or 80 for n, u in urls.items()}, direct=False)

    return resolve


@dataclass
class Machine:
    """One desktop: the labels it was asked for and the healthy instance now behind it."""

    name: str
    task: str = ""
    rollout: int | None = None
    instance: InstanceRecord | None = None
    reach: Reach | None = None
    #: What the last health check found of each port (``open``, ``closed``, ``blocked``).
    ports: dict[str, str] = field(default_factory=dict)
    #: Set once anything may have changed the desktop; a revert of an unused one is skipped.
    used: bool = False
    #: Why the instance behind it is gone (it died, or was stopped), noticed by the fleet's watch.
    lost: str | None = None
    #: Instances launched for this desktop so far (replacements and reverts included).
    launches: int = 0

    def mark_used(self) -> None:
        self.used = True

    @property
    def url(self) -> str | None:
        """The controller server's base URL, while an instance is behind the desktop."""
        return self.reach.url if self.reach is not None else None

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
    #: Instances found dead (terminated, stopped, gone) behind the fleet's back.
    died: int = 0
    reverts: int = 0
    reverts_skipped: int = 0
    #: Launches that went to another instance type or zone because EC2 had no capacity.
    capacity_fallbacks: int = 0
    #: Instance types launched, with how many of each.
    instance_types: dict[str, int] = field(default_factory=dict)
