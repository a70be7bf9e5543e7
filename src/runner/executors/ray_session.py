"""Joining a Ray cluster for one run, or starting a private one on this machine.

``local`` starts Ray here bound to 127.0.0.1 (no dashboard, no usage statistics) and shuts
it down when the run ends; ``auto`` and ``ray://…`` join a cluster someone else runs and
only disconnect. A session already open in this process (e.g. a test's) is reused as is.
Every host must have this project installed in the same Python environment as the
driver; nothing else needs to be shared (see `runner.executors.ray_pool`). A cluster started
with Ray's token authentication (``ray start --head`` turns it on by itself when
``~/.ray/auth_token`` exists) admits a driver only with ``RAY_AUTH_MODE=token`` and the
cluster's token (``RAY_AUTH_TOKEN_PATH`` or ``RAY_AUTH_TOKEN``) in its environment.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

import ray
from ray._private import ray_constants
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_incrementing

from core.protocols import EnvError

__all__ = ["LOCAL", "ray_session", "start_local_ray"]

#: The address that starts a private single-machine cluster.
LOCAL = "local"
#: Attempts at joining through Ray Client when the cluster's proxy fails to start the
#: per-driver server it forks for each client (a transient failure of a busy head node).
CLIENT_ATTEMPTS = 3
#: What the proxy answers then (ray.util.client.server.proxier).
_TRANSIENT = ("Starting Ray client server failed", "Server startup failed")
_log = logging.getLogger(__name__)


def _loopback_only() -> None:
    """Keep this process's Ray on 127.0.0.1: Ray turns a loopback address into the
    machine's routable one unless clustering is off, a setting it reads on each lookup
    (and its child processes read from the environment)."""
    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False


def start_local_ray(num_cpus: int | None = None) -> None:
    """Start Ray on this machine, reachable over loopback only."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    _loopback_only()
    ray.init(
        address=LOCAL,
        num_cpus=num_cpus if num_cpus is not None else os.cpu_count() or 1,
        _node_ip_address="127.0.0.1",
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,
        configure_logging=False,
    )


def _join_error(address: str, error: BaseException) -> str:
    """One line on why joining failed and what to do; Ray reports a refused token only
    deep in the chain of causes (as the text of a traceback)."""
    chain: list[str] = []
    seen: BaseException | None = error
    while seen is not None and len(chain) < 10:
        chain.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or seen.__context__
    if any("InvalidAuthToken" in text or "AuthenticationError" in text for text in chain):
        return (
            f"the Ray cluster at {address!r} refused this driver's authentication token; set RAY_AUTH_MODE=token "
            "and RAY_AUTH_TOKEN_PATH to the token file the cluster's nodes were started with"
        )
    return (
        f"cannot join the Ray cluster at {address!r} ({error}); "
        "start it with `ray start --head`, or pass --ray-address local"
    )


def _join(address: str) -> None:
    """Join a running cluster; a Ray Client proxy that failed to start this driver's server
    is asked again (with a warning), every other failure is final at once."""

    def transient(error: BaseException) -> bool:
        return isinstance(error, ConnectionError | RuntimeError) and any(t in str(error) for t in _TRANSIENT)

    def again(state: RetryCallState) -> None:
        _log.warning(
            "the Ray cluster at %s failed to start a client server for this driver (attempt %d of %d); "
            "asking again",
            address,
            state.attempt_number,
            CLIENT_ATTEMPTS,
        )
        ray.shutdown()

    for attempt in Retrying(retry=retry_if_exception(transient), stop=stop_after_attempt(CLIENT_ATTEMPTS),
                            wait=wait_incrementing(start=2.0, increment=2.0), before_sleep=again, reraise=True):
        with attempt:
            ray.init(
                address=address, log_to_driver=False, logging_level=logging.WARNING, configure_logging=False
            )


@contextmanager
def ray_session(address: str) -> Iterator[None]:
    """Ray connected for the duration of the block."""
    if ray.is_initialized():
        yield
        return
    try:
        if address == LOCAL:
            start_local_ray()
        else:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            if address.removeprefix("ray://").rsplit(":", 1)[0] in ("127.0.0.1", "localhost"):
                _loopback_only()  # a cluster on this machine's loopback: stay on it
            _join(address)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise EnvError(_join_error(address, e)) from None
    try:
        yield
    finally:
        ray.shutdown()
