"""A launching process the tests kill: launches desktops, says ``ready <ids>``, then waits.

Run as ``python fleet_child.py '<json>'``; boto3 finds moto and the fake keys in the
environment. With ``dead`` every instance's server is a closed loopback port, so the
process stays in its health wait (a launch in progress) until it is signalled. With
``exit_without_closing`` it launches one and returns without closing the fleet.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys

from aws import Fleet, FleetConfig, HttpProbe, InstanceRecord, Reach


async def main(args: dict[str, object]) -> None:
    cfg = FleetConfig(
        subnet_id=str(args["subnet"]),
        security_group_id=str(args["group"]),
        healthy_timeout=float(args.get("healthy_timeout", 5.0)),  # type: ignore[arg-type]
        probe_interval=0.05,
        running_delay=1,
        running_attempts=5,
        iam_propagation_wait=0.0,
        required_ports=["server"],
        vnc_port=None,
    )
    port = 9 if args.get("dead") else int(str(args["url"]).rsplit(":", 1)[1])

    def resolve(instance: InstanceRecord) -> Reach:
        return Reach(host="127.0.0.1", ports={"server": port}, direct=True)

    fleet = Fleet(cfg, run_id=str(args["run_id"]), probe=HttpProbe(str(args["token"])), resolve=resolve)
    if args.get("exit_without_closing"):  # a program that forgets to close: atexit must clean up
        machine = await fleet.launch("aws-0")
        print("ready", machine.instance_id, flush=True)
        return
    async with fleet:
        count = int(args["count"])  # type: ignore[call-overload]
        machines = await asyncio.gather(*(fleet.launch(f"aws-{k}", rollout=k) for k in range(count)))
        print("ready", " ".join(str(m.instance_id) for m in machines), flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    logging.getLogger("aws").setLevel(logging.DEBUG)
    asyncio.run(main(json.loads(sys.argv[1])))
