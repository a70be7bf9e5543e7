"""Joining a cluster through Ray Client: the proxy on the head forks one server per driver,
and on a busy head that start can fail once; the driver asks again, with a warning, and
gives up with one line after `CLIENT_ATTEMPTS`. Every other failure (a refused token, no
cluster at the address) is final at once.

Ray's proxy cannot be made to fail on demand, so `ray.init` is replaced here by one that
answers with the proxy's own error text (ray.util.client.worker raises it as a
ConnectionAbortedError); the two-node tests join a real proxy.
"""

from __future__ import annotations

import logging
import time

import pytest

from core.protocols import EnvError
from runner.executors import ray_session as session

ADDRESS = "ray://10.77.0.1:10001"
PROXY_FAILED = ConnectionAbortedError(
    'Initialization failure from server:\nTraceback (most recent call last):\n  File "proxier.py", line 772, in '
    "Datapath\n    raise RuntimeError(\nRuntimeError: Starting Ray client server failed. See "
    "ray_client_server_23000.err for detailed logs.\n"
)


class FakeRay:
    """`ray.init` answering from a list of outcomes (an exception, or None for joined)."""

    def __init__(self, outcomes: list[BaseException | None]) -> None:
        self.outcomes = outcomes
        self.inits = 0
        self.shutdowns = 0
        self.joined = False

    def init(self, **_: object) -> None:
        self.inits += 1
        outcome = self.outcomes.pop(0)
        if outcome is not None:
            raise outcome
        self.joined = True

    def shutdown(self) -> None:
        self.shutdowns += 1

    def is_initialized(self) -> bool:
        return False


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    monkeypatch.setattr(time, "sleep", lambda _s: None)  # what tenacity waits with between attempts
    ray = FakeRay([])
    monkeypatch.setattr(session, "ray", ray)
    return ray


def test_a_proxy_that_failed_to_start_a_server_is_asked_again(
    fake: FakeRay, caplog: pytest.LogCaptureFixture
) -> None:
    fake.outcomes = [PROXY_FAILED, None]
    with caplog.at_level(logging.WARNING), session.ray_session(ADDRESS):
        assert fake.joined
    assert fake.inits == 2
    assert "failed to start a client server for this driver (attempt 1 of 3)" in caplog.text


def test_a_proxy_that_keeps_failing_ends_in_one_line(fake: FakeRay) -> None:
    fake.outcomes = [PROXY_FAILED] * session.CLIENT_ATTEMPTS
    with pytest.raises(EnvError) as raised, session.ray_session(ADDRESS):
        pass
    assert fake.inits == session.CLIENT_ATTEMPTS
    message = str(raised.value)
    assert (
        message.startswith(f"cannot join the Ray cluster at {ADDRESS!r}")
        and "pass --ray-address local" in message
    )


@pytest.mark.parametrize(
    "error",
    [
        ConnectionError("ray client connection timeout"),
        ConnectionAbortedError(
            "Initialization failure from server:\nray.exceptions.AuthenticationError: InvalidAuthToken"
        ),
        ValueError("bad address"),
    ],
)
def test_other_failures_are_final_at_once(error: BaseException, fake: FakeRay) -> None:
    fake.outcomes = [error, None]
    with pytest.raises(EnvError), session.ray_session(ADDRESS):
        pass
    assert fake.inits == 1
