"""`agent-s3 aws`: list the fleet's EC2 desktops and reap the ones nobody owns any more.

``agent-s3 aws ls`` shows every instance carrying the project's marker tag;
``agent-s3 aws reap [--run-id ID] [--region R] [--dry-run]`` terminates orphans: the named
run's instances, instances past their time to live, and instances launched from this host
by a process that is gone. Credentials come from boto3's usual chain and are never printed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from aws import InstanceRecord, find_instances, reap
from aws.ec2 import ec2_client
from aws.tags import OWNER, ROLLOUT, TASK

from .errors import fail

__all__ = ["app"]

T = TypeVar("T")

app = typer.Typer(help="EC2 desktops of the OSWorld fleet: ls, reap.", no_args_is_help=True)

Regions = Annotated[
    list[str] | None,
    typer.Option("--region", "-r", help="Region to look in; repeatable (default $AWS_REGION, else us-east-1)."),
]
RunId = Annotated[str | None, typer.Option("--run-id", help="Only this run's instances.")]
Endpoint = Annotated[
    str | None,
    typer.Option("--endpoint-url", help="EC2 endpoint, e.g. an emulator (default boto3's, or $AWS_ENDPOINT_URL_EC2)."),
]


def _regions(given: list[str] | None) -> list[str]:
    if given:
        return list(dict.fromkeys(given))
    return [os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"]


def _client_factory(endpoint: str | None) -> Callable[[str], Any]:
    return lambda region: ec2_client(region, endpoint)


def _aws(call: Callable[[], T]) -> T:
    """Run an EC2 call; the usual failures become one line that says what to do."""
    try:
        return call()
    except NoCredentialsError:
        message = "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
    except NoRegionError:
        message = "no AWS region: pass --region or set AWS_REGION"
    except ClientError as exc:
        error = exc.response.get("Error", {})
        message = f"EC2 refused the request ({error.get('Code', '?')}): {error.get('Message', '')}; check the credentials' permissions and the region"
    except BotoCoreError as exc:
        message = f"cannot talk to EC2 ({type(exc).__name__}): check the network, the region and --endpoint-url"
    raise fail(message, code=1)


def _expires(record: InstanceRecord, now: float) -> str:
    expires = record.expires_at
    if expires is None:
        return "-"
    minutes = (expires - now) / 60
    return "expired" if minutes <= 0 else f"{minutes:.0f} min"


def _row(record: InstanceRecord, now: float) -> list[str]:
    return [
        record.id,
        record.region,
        record.state,
        record.run_id or "-",
        record.tags.get(TASK) or "-",
        record.tags.get(ROLLOUT) or "-",
        record.tags.get(OWNER) or "-",
        _expires(record, now),
        record.instance_type,
    ]


def _table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


@app.command("ls")
def list_instances(
    region: Regions = None,
    run_id: RunId = None,
    endpoint_url: Endpoint = None,
    terminated: Annotated[bool, typer.Option("--terminated", help="Also show terminated instances.")] = False,
) -> None:
    """List the project's instances (marker tag) with their run, task, owner and time left."""
    regions = _regions(region)
    states = ["pending", "running", "stopping", "stopped", "shutting-down"] + (["terminated"] if terminated else [])
    records = _aws(
        lambda: find_instances(regions, run_id=run_id, client_for=_client_factory(endpoint_url), states=states)
    )
    if not records:
        typer.echo(f"no agent-s3 instances in {', '.join(regions)}")
        return
    now = time.time()
    header = ["INSTANCE", "REGION", "STATE", "RUN", "TASK", "ROLLOUT", "OWNER", "EXPIRES", "TYPE"]
    _table([_row(r, now) for r in records], header)
    typer.echo(f"{len(records)} instance(s)")


@app.command("reap")
def reap_instances(
    region: Regions = None,
    run_id: RunId = None,
    endpoint_url: Endpoint = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would be terminated.")] = False,
    everything: Annotated[
        bool, typer.Option("--all", help="Terminate every agent-s3 instance, live runs' included.")
    ] = False,
) -> None:
    """Terminate orphans: the run's instances (--run-id), expired ones, and those of dead local launchers."""
    regions = _regions(region)
    result = _aws(
        lambda: reap(
            regions,
            run_id=run_id,
            everything=everything,
            dry_run=dry_run,
            client_for=_client_factory(endpoint_url),
        )
    )
    verb = "would terminate" if dry_run else "terminated"
    for record, reason in result.orphans:
        typer.echo(f"{verb} {record.id} ({record.region}, run {record.run_id or '-'}): {reason}")
    count = len(result.orphans) if dry_run else len(result.terminated)
    typer.echo(f"{count} {verb}, {len(result.kept)} kept (owned by live runs, TTL not over)")
