"""The fleet's own overhead, against a moto EC2 server and a loopback controller server.

EC2 itself is not measured (moto changes states instantly); what is: launching N desktops
one after another versus all at once (the ratio shows launches overlap), a revert of a used
desktop (terminate + relaunch + health probe) versus a skipped one, a screenshot through
an `AWSDesktop` (its rerouting transport and liveness checks) versus a plain client to the
same server, and reaping N orphans. The machine is shared: compare ratios.

    python benchmarks/fleet.py [-n 8] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aws import Fleet, FleetConfig, HttpProbe, InstanceRecord, Reach, reap
from environments.osworld import OSWorldClient
from environments.osworld.aws import AWSProvider


@contextmanager
def _process(argv: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)


def _wait_for(predicate: object, what: str) -> None:
    deadline = time.monotonic() + 30
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not start")
        time.sleep(0.05)


@contextmanager
def _stack(folder: Path) -> Iterator[tuple[str, str, str]]:
    """(moto URL, controller URL, token) with Xvfb behind the controller."""
    moto_log = folder / "moto.log"
    exe = str(Path(sys.executable).with_name("moto_server"))
    with _process([exe, "-H", "127.0.0.1", "-p0"], moto_log):
        _wait_for(lambda: re.search(r"Running on (http://\S+)", moto_log.read_text()), "moto_server")
        moto = re.search(r"Running on (http://\S+)", moto_log.read_text()).group(1)  # type: ignore[union-attr]
        read_fd, write_fd = os.pipe()
        xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1280x720x24", "-nolisten", "tcp"],
                                pass_fds=[write_fd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as pipe:
            display = ":" + pipe.readline().strip().decode()
        token = secrets.token_urlsafe(18)
        (folder / "token").write_text(token)
        port_file = folder / "port"
        argv = [sys.executable, "-m", "environments.server", "--port", "0", "--port-file", str(port_file),
                "--token-file", str(folder / "token")]  # fmt: skip
        try:
            with _process(argv, folder / "server.log", {**os.environ, "DISPLAY": display}):
                _wait_for(lambda: port_file.exists() and port_file.read_text().strip(), "controller server")
                yield moto, f"http://127.0.0.1:{port_file.read_text().strip()}", token
        finally:
            xvfb.terminate()
            xvfb.wait()


async def _run(n: int, rounds: int, moto: str, server: str, token: str) -> None:
    import boto3

    ec2 = boto3.session.Session(region_name="us-east-1").client("ec2", endpoint_url=moto)
    vpc = ec2.create_vpc(CidrBlock="172.31.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.0.0/20")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="bench-desktops", Description="bench", VpcId=vpc)["GroupId"]
    # The loopback server stands in for each instance's; its other ports are not there, so only
    # the server is required (the fleet's own port checks are timed by tests/aws/test_ports.py).
    cfg = FleetConfig(subnet_id=subnet, security_group_id=group, endpoint_url=moto, probe_interval=0.05,
                      running_delay=1, max_instances=2 * n, required_ports=["server"], vnc_port=None,
                      iam_propagation_wait=0.0)
    port = int(server.rsplit(":", 1)[1])

    def resolve(instance: InstanceRecord) -> Reach:
        return Reach("127.0.0.1", {"server": port}, direct=True)

    probe = HttpProbe(token)
    async with Fleet(cfg, run_id="bench-serial", probe=probe, resolve=resolve) as fleet:
        start = time.perf_counter()
        for k in range(n):
            await fleet.launch(f"aws-{k}")
        serial = time.perf_counter() - start
    async with Fleet(cfg, run_id="bench-parallel", probe=probe, resolve=resolve) as fleet:
        start = time.perf_counter()
        machines = await asyncio.gather(*(fleet.launch(f"aws-{k}") for k in range(n)))
        parallel = time.perf_counter() - start
        skipped, relaunched = [], []
        for _ in range(rounds):
            start = time.perf_counter()
            await fleet.revert(machines[0])
            skipped.append(time.perf_counter() - start)
            machines[0].mark_used()
            start = time.perf_counter()
            await fleet.revert(machines[0])
            relaunched.append(time.perf_counter() - start)
    async with AWSProvider(1, config=cfg, run_id="bench-shot", token=token, resolve=resolve) as pool:
        env = await pool.acquire()
        direct = OSWorldClient(server, token=token)
        via_env, via_client = [], []
        for _ in range(rounds * 4):
            start = time.perf_counter()
            await env.screenshot()
            via_env.append(time.perf_counter() - start)
            start = time.perf_counter()
            await direct.screenshot()
            via_client.append(time.perf_counter() - start)
        await direct.aclose()
    orphans = Fleet(cfg, run_id="bench-orphans", probe=probe, resolve=resolve)
    await asyncio.gather(*(orphans.launch(f"aws-{k}") for k in range(n)))
    start = time.perf_counter()
    result = reap(["us-east-1"], run_id="bench-orphans", client_for=lambda region: ec2)
    reaped = time.perf_counter() - start
    await orphans.close()

    ms = statistics.median
    print(f"launch {n} desktops: serial {serial:.2f} s, parallel {parallel:.2f} s, ratio {serial / parallel:.1f}x")
    print(f"revert: used (terminate+relaunch+probe) {1000 * ms(relaunched):.0f} ms, "
          f"unused (skipped) {1000 * ms(skipped):.2f} ms")  # fmt: skip
    print(f"screenshot: via AWSDesktop {1000 * ms(via_env):.1f} ms, plain client {1000 * ms(via_client):.1f} ms, "
          f"ratio {ms(via_env) / ms(via_client):.2f}")  # fmt: skip
    print(f"reap {len(result.terminated)} orphans: {reaped:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=8, help="desktops launched at once")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    with tempfile.TemporaryDirectory() as folder, _stack(Path(folder)) as (moto, server, token):
        os.environ["AWS_ENDPOINT_URL"] = moto  # the TTL schedules go to moto too
        os.chdir(folder)  # no .env of this machine is read
        asyncio.run(_run(args.n, args.rounds, moto, server, token))


if __name__ == "__main__":
    main()
