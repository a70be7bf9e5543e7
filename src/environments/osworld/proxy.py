"""OSWorld's proxy for tasks marked ``proxy: true``, configured as OSWorld configures it.

OSWorld's AWS scripts build ``DesktopEnv(enable_proxy=True)``: before such a task's setup,
``SetupController._proxy_setup(password)`` takes the next proxy of its pool, starts
tinyproxy in the VM on ``127.0.0.1:18888`` with that proxy as upstream and exports
``http(s)_proxy`` in ``~/.bashrc``; Chrome launched by the task's steps then gets
``--proxy-server=http://127.0.0.1:18888`` and getters see ``current_use_proxy``. The pool is
the JSON file ``PROXY_CONFIG_FILE`` (by default ``evaluation_examples/settings/proxy/
dataimpulse.json`` under the current folder): a list of ``{host, port, username, password,
protocol}``.

Here the file is found the same way (``proxy_config_file`` of the fleet, else
``PROXY_CONFIG_FILE``, else desktop-env's default path), checked (a broken file is one line,
where OSWorld's pool logs an error and stays empty), loaded into OSWorld's own pool, and
OSWorld's own ``_proxy_setup`` runs through the door to the desktop. That controller logs
each command whole, the sudo password and the proxy's credentials with them: its log
records are redacted while it runs. With ``proxy: auto`` and no pool file, proxy tasks run
without it, as OSWorld runs them with its proxy off, and the run's note says so.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from core.trajectory import Task
from environments.tasks.client import TaskClient
from environments.tasks.door import Endpoint, reach
from environments.tasks.official import setup_controller_class
from environments.tasks.steps import in_daemon_thread

__all__ = ["ProxyPlan", "env_plan", "next_proxy", "plan_proxy", "redacted", "start_proxy", "wants_proxy"]

ProxyMode = Literal["auto", "on", "off"]
_LOGGERS = ("desktopenv.setup", "desktopenv.providers.aws.ProxyPool")
#: How long OSWorld's `_proxy_setup` may take (it installs tinyproxy with apt in the VM).
_PROXY_SETUP_LIMIT_S = 900.0


@dataclass(frozen=True)
class ProxyPlan:
    """Whether proxy tasks get OSWorld's proxy, and from which pool file."""

    enabled: bool
    file: Path | None
    proxies: int = 0
    #: Secrets of the pool (usernames, passwords), redacted from OSWorld's log records.
    secrets: tuple[str, ...] = ()

    @property
    def note(self) -> str | None:
        """Why proxy tasks run without the proxy, when they do."""
        if self.enabled:
            return None
        where = f" ({self.file})" if self.file is not None else ""
        return f"OSWorld's proxy is off{where}: tasks marked proxy: true run without it"


def wants_proxy(task: Task) -> bool:
    """Whether the task asks for OSWorld's proxy (``"proxy": true`` in its file)."""
    return task.proxy


def _read_pool(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"proxy pool file {path} cannot be read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"proxy pool file {path} is not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, list) or not data:
        raise ValueError(f"proxy pool file {path} must be a non-empty list of {{host, port, username, password}}")
    for k, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("host"), str) \
                or not isinstance(item.get("port"), int | str):
            raise ValueError(f"proxy pool file {path}: entry {k} needs a host and a port (OSWorld's format)")
    return data


def plan_proxy(mode: ProxyMode, file: str | None) -> ProxyPlan:
    """The plan for a run: `mode` (``auto`` follows the file's existence) and the pool `file`
    (relative to the current folder, as OSWorld reads it); ValueError says what is wrong."""
    if mode == "off":
        return ProxyPlan(False, None)
    path = Path(file) if file else None
    if path is None or not path.is_file():
        if mode == "on":
            raise ValueError(f"proxy: on needs OSWorld's proxy pool file, but {path or 'no file'} does not exist: "
                             f"set proxy_config_file or PROXY_CONFIG_FILE")
        return ProxyPlan(False, path)
    pool = _read_pool(path)
    secrets = tuple(str(p[k]) for p in pool for k in ("username", "password") if p.get(k))
    return ProxyPlan(True, path.resolve(), len(pool), secrets)


def env_plan() -> ProxyPlan:
    """The plan OSWorld's own setup controller would follow here: ``PROXY_CONFIG_FILE``, else
    desktop-env's default path, used when it exists (for desktops without a fleet's settings)."""
    import os

    from aws import UpstreamMissing, upstream

    try:
        default = upstream().proxy_config_file
    except UpstreamMissing:
        default = "evaluation_examples/settings/proxy/dataimpulse.json"
    return plan_proxy("auto", os.environ.get("PROXY_CONFIG_FILE") or default)


def next_proxy(plan: ProxyPlan) -> Any:
    """The next proxy of OSWorld's pool (its ``ProxyInfo``: host, port, username, password),
    chosen by OSWorld's own round robin; ValueError when none is available."""
    if not plan.enabled or plan.file is None:
        raise ValueError("next_proxy needs an enabled plan")
    _load_pool(plan.file)
    from desktop_env.providers.aws.proxy_pool import get_global_proxy_pool

    proxy = get_global_proxy_pool().get_next_proxy()
    if proxy is None:
        raise ValueError(f"OSWorld's proxy pool ({plan.file}) has no proxy available now")
    return proxy


@functools.cache
def _load_pool(path: Path) -> None:
    """OSWorld's global pool, loaded from `path` (what its setup controller reads)."""
    setup_controller_class()  # imports OSWorld's setup module, which builds its own pool first
    from desktop_env.providers.aws.proxy_pool import init_proxy_pool

    init_proxy_pool(str(path))


class _Redact(logging.Filter):
    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        for secret in self.secrets:
            text = text.replace(secret, "***")
        record.msg, record.args = text, ()
        return True


@contextlib.contextmanager
def redacted(secrets: Sequence[str]) -> Iterator[None]:
    """OSWorld's setup and proxy-pool log records with `secrets` replaced by ``***``."""
    flt = _Redact(secrets)
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    for logger in loggers:
        logger.addFilter(flt)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(flt)


def _proxy_setup(endpoint: Endpoint, password: str) -> None:
    controller = setup_controller_class()(vm_ip=endpoint.host, server_port=endpoint.port,
                                          chromium_port=endpoint.chromium_port, vlc_port=endpoint.vlc_port,
                                          client_password=password)
    if controller._proxy_setup(password) is False:
        raise RuntimeError(f"the controller server at {endpoint.url} did not answer")


async def start_proxy(target: TaskClient | Endpoint, plan: ProxyPlan, password: str, *, task_id: str) -> None:
    """OSWorld's `_proxy_setup` on the desktop behind `target` (blocking parts in a thread)."""
    if not plan.enabled or plan.file is None:
        raise ValueError("start_proxy needs an enabled plan")
    _load_pool(plan.file)
    async with reach(target) as endpoint:
        with redacted((*plan.secrets, password)):
            try:
                await in_daemon_thread(functools.partial(_proxy_setup, endpoint, password),
                                       limit=_PROXY_SETUP_LIMIT_S, what=f"task {task_id}: OSWorld's proxy setup")
            except Exception as exc:
                text = str(exc)
                for secret in (*plan.secrets, password):
                    if secret:
                        text = text.replace(secret, "***")
                raise RuntimeError(f"task {task_id}: OSWorld's proxy setup failed: {text}") from None
