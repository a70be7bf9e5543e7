"""How a fleet's desktops compare with desktop-env's own AWS desktops, for a run's label.

Two kinds of difference. Those that change the experiment (another image, instance type,
network or disk than desktop-env's) make a run's scores not leaderboard-comparable. Those the
fleet makes on purpose and that leave the desktop as desktop-env would have it (tags, a
stricter readiness check, caps, the watch for dead instances, the TTL also in user data, and
OSWorld's proxy off when there is no pool file, as DesktopEnv has it by default) are listed
so a reader knows, and the run stays comparable. `Comparison.note` gives both in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .address import port_list
from .config import FleetConfig
from .upstream import upstream

__all__ = ["Comparison", "compare"]


@dataclass(frozen=True)
class Comparison:
    """What differs from desktop-env's AWS provider, and whether the scores stay comparable."""

    version: str
    image: str
    instance_type: str
    experiment: list[str] = field(default_factory=list)
    """Differences that change what is measured."""
    deliberate: list[str] = field(default_factory=list)
    """Differences made on purpose that leave the desktop as desktop-env would have it."""

    @property
    def comparable(self) -> bool:
        return not self.experiment

    @property
    def note(self) -> str:
        base = f"EC2 desktops as desktop-env {self.version} launches them ({self.image}, {self.instance_type})"
        if self.experiment:
            base = (f"not leaderboard-comparable: EC2 desktops unlike desktop-env {self.version}'s: "
                    + "; ".join(self.experiment))
        return base + ("; on purpose here: " + "; ".join(self.deliberate) if self.deliberate else "")


def compare(cfg: FleetConfig, *, instance_types: dict[str, int] | None = None, proxy_off: bool = False) -> Comparison:
    """`cfg` (resolved) against desktop-env; `instance_types` launched so far (capacity fallbacks
    show there); `proxy_off` when tasks asked for OSWorld's proxy and ran without it."""
    up = upstream()
    region = cfg.region or "us-east-1"
    theirs_image = up.images.get(region, {}).get(cfg.screen)
    image = cfg.image_id()
    experiment: list[str] = []
    if image != theirs_image:
        experiment.append(f"image {image} (desktop-env: {theirs_image or f'none for {region} {cfg.screen}'})")
    used = sorted(instance_types or {cfg.instance_type or up.instance_type: 1})
    other = [t for t in used if t != up.instance_type]
    if other:
        experiment.append(f"instance type {', '.join(other)} (desktop-env: {up.instance_type})")
    theirs_ip = bool(up.launch["NetworkInterfaces"][0]["AssociatePublicIpAddress"])
    if cfg.assign_public_ip != theirs_ip:
        experiment.append(f"public IP {'on' if cfg.assign_public_ip else 'off'} (desktop-env: "
                          f"{'on' if theirs_ip else 'off'})")
    ebs = up.launch["BlockDeviceMappings"][0]["Ebs"]
    mine = {"VolumeSize": cfg.disk_gb, "Iops": cfg.disk_iops, "Throughput": cfg.disk_throughput}
    if any(ebs.get(k) != v for k, v in mine.items()):
        experiment.append(f"root volume {cfg.disk_gb} GB, {cfg.disk_iops} IOPS, {cfg.disk_throughput} MB/s "
                          f"(desktop-env: {ebs.get('VolumeSize')} GB, {ebs.get('Iops')} IOPS, {ebs.get('Throughput')} MB/s)")
    deliberate = [
        f"ready when the server returns a screenshot and {port_list(cfg.ports, list(cfg.required_ports))} are "
        f"reachable (desktop-env polls /terminal, its scripts then sleep 60 s)",
        f"a watch replaces dead instances (every {cfg.watch_interval:g} s)",
        f"at most {cfg.max_instances} instances" + (f", ${cfg.max_cost:g} cost cap" if cfg.max_cost else ""),
        "root volumes deleted on termination",
    ]
    if cfg.tag_instances:
        deliberate.insert(0, "instances tagged agent-s3:* (needs ec2:CreateTags)")
    if cfg.ttl_user_data:
        deliberate.append("TTL also in user data")
    if not cfg.ttl_schedule or cfg.ttl_seconds is None:
        deliberate.append("no cloud TTL schedule" if cfg.ttl_seconds is not None else "no TTL")
    if proxy_off:  # DesktopEnv's own default; OSWorld's run scripts turn it on
        deliberate.append("OSWorld's proxy off (no proxy pool file): tasks marked proxy: true run without it")
    if cfg.instance_type_fallbacks or cfg.subnet_fallbacks:
        deliberate.append("other instance types or zones when EC2 has no capacity")
    return Comparison(up.version, image, cfg.instance_type or up.instance_type, experiment, deliberate)
