"""EC2 fleet for OSWorld desktop images: launch, tag, wait, revert, terminate and reap.

`Fleet` launches tagged, TTL'd desktops from OSWorld's images and keeps them healthy;
`reap` finds what a crashed run left behind. Only `environments` (and the command line)
import it. Usage::

    async with Fleet(FleetConfig(max_instances=8), run_id="r1") as fleet:
        desktop = await fleet.launch("aws-1", task=task_id, rollout=0)
        ...  # talk to desktop.url
        await fleet.revert(desktop)      # terminate + relaunch, skipped if never used

Launches follow desktop-env's AWS provider (`aws.upstream` reads it from the installed
package): its image table, instance type, public IP, required subnet and security group,
root volume, TTL (an EventBridge Scheduler schedule per instance, `aws.ttl`). The fleet adds,
on purpose: tags (``agent-s3:*``, read by `reap`), a stricter readiness check (a screenshot
and every controller port, `aws.health`), caps on instances and dollars (`aws.costs`), a
watch that notices dead instances (`aws.watch`) and fallbacks on capacity shortages.
`aws.comparison` names these differences for a run's ``leaderboard_note``.
"""

from .address import PORT_NAMES, PORT_ROLES, Reach, port_list
from .config import DEFAULT_PRICES, ENV_VARS, FleetConfig, FleetConfigError, default_images
from .costs import CostBook
from .errors import CostCapReached, FleetCapReached, FleetClosed, FleetError, PortsBlocked, UnhealthyDesktop
from .fleet import Fleet
from .health import HealthProbe, HttpProbe, PortState, port_state, probe_ports, wait_healthy
from .machine import AddressResolver, FleetStats, Machine, server_address
from .reap import ReapResult, find_instances, orphan_reason, reap
from .registry import terminate_all
from .tags import InstanceRecord
from .upstream import UpstreamAWS, UpstreamMissing, upstream

__all__ = [
    "DEFAULT_PRICES",
    "ENV_VARS",
    "PORT_NAMES",
    "PORT_ROLES",
    "AddressResolver",
    "CostBook",
    "CostCapReached",
    "Fleet",
    "FleetCapReached",
    "FleetClosed",
    "FleetConfig",
    "FleetConfigError",
    "FleetError",
    "FleetStats",
    "HealthProbe",
    "HttpProbe",
    "InstanceRecord",
    "Machine",
    "PortState",
    "PortsBlocked",
    "Reach",
    "ReapResult",
    "UnhealthyDesktop",
    "UpstreamAWS",
    "UpstreamMissing",
    "default_images",
    "find_instances",
    "orphan_reason",
    "port_list",
    "port_state",
    "probe_ports",
    "reap",
    "server_address",
    "terminate_all",
    "upstream",
    "wait_healthy",
]
