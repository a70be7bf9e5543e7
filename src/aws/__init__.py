"""EC2 fleet for OSWorld desktop images: launch, tag, wait, revert, terminate and reap.

`Fleet` launches tagged, TTL'd desktops from OSWorld's images and keeps them healthy;
`reap` finds what a crashed run left behind. Only `environments` (and the command line)
import it. Usage::

    async with Fleet(FleetConfig(max_instances=8), run_id="r1") as fleet:
        desktop = await fleet.launch("aws-1", task=task_id, rollout=0)
        ...  # talk to desktop.url
        await fleet.revert(desktop)      # terminate + relaunch, skipped if never used

TTL enforcement, and what the moto emulator does with it: every instance carries an
``agent-s3:expires`` tag (read by `reap`), is launched with
``InstanceInitiatedShutdownBehavior=terminate`` and with user data that powers it off when
the TTL ends. moto stores the shutdown behaviour and the user data (both read back by
``describe_instance_attribute``) but runs no guest, so under moto only the tag plus `reap`
enforce the TTL.
"""

from .config import DEFAULT_IMAGES, DEFAULT_PRICES, ENV_VARS, FleetConfig, FleetConfigError
from .costs import CostBook
from .errors import CostCapReached, FleetCapReached, FleetClosed, FleetError, UnhealthyDesktop
from .fleet import Fleet
from .health import HealthProbe, HttpProbe, wait_healthy
from .machine import AddressResolver, FleetStats, Machine, server_address
from .reap import ReapResult, find_instances, orphan_reason, reap
from .registry import terminate_all
from .tags import InstanceRecord

__all__ = [
    "DEFAULT_IMAGES",
    "DEFAULT_PRICES",
    "ENV_VARS",
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
    "ReapResult",
    "UnhealthyDesktop",
    "find_instances",
    "orphan_reason",
    "reap",
    "server_address",
    "terminate_all",
    "wait_healthy",
]
