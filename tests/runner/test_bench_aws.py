"""``agent-s3 bench osworld --env aws`` end to end: an OSWorld task list and examples folder
(two local-suite tasks), the fleet launching instances through a moto EC2 server over HTTP
with the real boto3 client, and every instance's server reached through the documented
``fleet.connect_via`` setting (a forwarded port), which here is the project's controller
server of a local desktop on loopback. The fake private IPs moto hands out are never
dialled. Each task is set up, run, evaluated; the instances are tagged with the run and
the task they served, and none is left running at the end."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runner_helpers import desktops_missing, start_desktop, threaded_servers

from core.llm import Script, ScriptRequest
from environments.local import LocalDesktop
from environments.local.spawner import run_all
from environments.tasks import SUITE_DIR
from runner.demo_policy import DEMO_PLANS, role_of
from testing.llm import OpenAIServer

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

KEY = "sk-bench-aws-test"
#: The tasks, in list order, and a marker of each one's instruction.
TASKS = {"mousepad-append-line": "groceries.txt", "terminal-make-dirs": "~/projects/alpha"}
DOMAINS = {"mousepad-append-line": "mousepad", "terminal-make-dirs": "terminal"}
AGENT = Path(sys.executable).with_name("agent-s3")
REGION = "us-east-1"
FAKE_SECRET = "fake-secret-" + secrets.token_hex(12)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def moto_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's EC2 emulator over loopback HTTP."""
    exe = Path(sys.executable).with_name("moto_server")
    if not exe.exists():
        pytest.skip("moto_server is not installed in this environment (pip install 'moto[server]')")
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p0"], stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + 60
    try:
        while not (found := re.search(r"Running on (http://127\.0\.0\.1:\d+)", log.read_text(errors="replace"))):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"moto_server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        yield found.group(1)
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalDesktop]:
    """A local desktop whose controller server stands in for every instance's."""
    reason = desktops_missing()
    if reason is not None:
        pytest.skip(reason)
    found = start_desktop(tmp_path_factory.mktemp("aws-vm"), "aws-vm", "tests-bench-aws", tcp_forward=True)
    yield found
    run_all([found.close])


def _reply(request: ScriptRequest) -> str:
    system = next((m.text() for m in request.messages if m.role == "system"), "")
    text = "\n".join(m.text() for m in request.messages)
    if role_of(request.messages) in ("grounding", "reflection", "code_agent", "code_summary"):
        return str(DEMO_PLANS["mousepad-append-line"](request))
    for task_id, marker in TASKS.items():
        if marker in text and not system.startswith("You describe"):
            return str(DEMO_PLANS[task_id](request))
    return "I cannot tell what is asked."


@pytest.fixture
def model_url() -> Iterator[str]:
    with threaded_servers(OpenAIServer(Script("bench-aws-policy", [_reply] * 500), api_key=KEY)) as (url,):
        yield url


def _aws_env(moto_url: str, tmp: Path) -> dict[str, str]:
    """boto3 pointed at moto with fake keys; nothing of a real account reachable."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and k not in ("ENABLE_TTL", "DEFAULT_TTL_MINUTES") and not k.endswith("_API_KEY")}
    env.update({
        "AWS_ACCESS_KEY_ID": "AKIAFAKE" + secrets.token_hex(6).upper(), "AWS_SECRET_ACCESS_KEY": FAKE_SECRET,
        "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT_URL_EC2": moto_url, "AWS_ENDPOINT_URL": moto_url,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/nonexistent/aws-config", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        "OPENAI_API_KEY": KEY, "COLUMNS": "200", "AGENT_S3_ENV_DIR": str(tmp / "envs"),
    })  # fmt: skip
    return env


def _task_list(tmp: Path) -> tuple[Path, Path]:
    """OSWorld's layout: a list of ids per domain, and examples/<domain>/<id>.json."""
    examples = tmp / "evaluation_examples" / "examples"
    for task_id, domain in DOMAINS.items():
        (examples / domain).mkdir(parents=True, exist_ok=True)
        shutil.copy(SUITE_DIR / "examples" / domain / f"{task_id}.json", examples / domain / f"{task_id}.json")
        files = SUITE_DIR / "files" / task_id  # the examples' setup files, where their paths point
        if files.is_dir():
            shutil.copytree(files, tmp / "evaluation_examples" / "files" / task_id)
    listing = tmp / "evaluation_examples" / "test_two.json"
    listing.write_text(json.dumps({domain: [task_id] for task_id, domain in DOMAINS.items()}))
    return listing, examples


def _instances(ec2: Any, run_id: str) -> list[dict[str, Any]]:
    reply = ec2.describe_instances(Filters=[{"Name": "tag:agent-s3:run", "Values": [run_id]}])
    return [i for r in reply["Reservations"] for i in r["Instances"]]


@pytest.mark.timeout(180)
def test_bench_osworld_on_an_ec2_fleet_through_connect_via(tmp_path: Path, moto_url: str, desktop: LocalDesktop,
                                                           model_url: str) -> None:
    import boto3

    env = _aws_env(moto_url, tmp_path)
    ec2 = boto3.session.Session(region_name=REGION, aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                                aws_secret_access_key=FAKE_SECRET).client("ec2", endpoint_url=moto_url)
    vpc = ec2.create_vpc(CidrBlock="172.31.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.0.0/20")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName=f"desktops-{secrets.token_hex(3)}", Description="desktops",
                                      VpcId=vpc)["GroupId"]
    server, token = desktop.info().base_url, desktop.info().token()
    assert server is not None and server.startswith("http://127.0.0.1:") and token
    run_id = "aws-" + secrets.token_hex(3)
    config = tmp_path / "aws.yaml"
    config.write_text(json.dumps({"environment": {"kind": "aws", "token": token, "fleet": {
        "subnet_id": subnet, "security_group_id": group, "healthy_timeout": 20,
        "probe_interval": 0.1, "running_delay": 1, "running_attempts": 10, "max_instances": 2,
        # These tasks need neither Chrome nor VLC: the server alone is forwarded and required.
        "connect_via": {"server": server}, "required_ports": ["server"], "vnc_port": None,
        "iam_propagation_wait": 0, "watch_interval": 1,
    }}}))
    listing, examples = _task_list(tmp_path)
    out = tmp_path / "runs"
    done = subprocess.run(
        [str(AGENT), "bench", "osworld", "--tasks", str(listing), "--examples", str(examples), "--env", "aws",
         "--model", "openai/policy", "--base-url", model_url, "--strategy", "single", "--settle", "0.2",
         "--out", str(out), "--run-id", run_id, "-c", str(config)],
        env=env, capture_output=True, text=True, timeout=150, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 tasks, 0 skipped" in done.stdout

    run = out / run_id
    for task_id in TASKS:
        result = json.loads((run / task_id / "result.json").read_text())
        assert result["selected_score"] == 1.0 and result["n"] == 1
        header = json.loads((run / task_id / "rollout-0" / "rollout.json").read_text())
        assert header["status"] == "done" and header["score"] == 1.0
        assert header["environment"].startswith("aws-")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["overall"]["tasks"] == 2 and summary["overall"]["selected"] == 1.0
    # The fleet runs desktop-env's image as desktop-env launches it: comparable, and the note says
    # what the fleet does on purpose besides.
    assert summary["leaderboard_comparable"] is True
    note = summary["comparability_note"]
    assert note.startswith("EC2 desktops as desktop-env 1.0.2 launches them (") and "on purpose here:" in note
    assert "instances tagged agent-s3:*" in note and "ready when the server returns a screenshot" in note
    assert summary["scorer"] == "desktop-env 1.0.2" and "not leaderboard-comparable" not in done.stdout

    # The fleet launched one instance, relaunched it for the second task (a revert), and
    # terminated everything it launched; each instance carries the run and its task.
    instances = _instances(ec2, run_id)
    assert len(instances) == 2, instances
    assert {i["State"]["Name"] for i in instances} == {"terminated"}
    assert all(i["PrivateIpAddress"].startswith("172.31.") for i in instances)
    tags = [{t["Key"]: t["Value"] for t in i["Tags"]} for i in instances]
    assert sorted(t["agent-s3:task"] for t in tags) == sorted(TASKS)
    assert all(t["agent-s3:rollout"] == "0" for t in tags)
    running = ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]},
                                              {"Name": "tag:agent-s3:run", "Values": [run_id]}])
    assert not [i for r in running["Reservations"] for i in r["Instances"]]
    # Neither the server's token nor the AWS secret reached a file of the run or its output.
    for path in run.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert token.encode() not in data and FAKE_SECRET.encode() not in data, path
    assert token not in done.stdout + done.stderr and FAKE_SECRET not in done.stdout + done.stderr
