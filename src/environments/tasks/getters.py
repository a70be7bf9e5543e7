"""Evaluator getters: OSWorld's own ``get_<type>`` functions, called with an `OfficialEnv`.

The project has no getter implementations. OSWorld's getters take its ``DesktopEnv`` and read
a handful of its attributes; `OfficialEnv` has exactly those (found by reading the getters of
desktop-env 1.0.2): ``controller`` (OSWorld's `PythonController` at the door), ``setup_controller``,
``vm_ip``, ``server_port``, ``chromium_port``, ``vlc_port``, ``cache_dir``,
``current_use_proxy``, and the ``vm_platform`` / ``vm_screen_size`` properties.

Host-side files: ``cloud_file`` downloads unless ``cache_dir/<dest>`` exists, so each URL is
seeded there from its local copy first (no network here; a missing copy is one clear line).
Every name a task gives that a getter joins to ``cache_dir`` (each ``dest``, ``cache_file``'s
``path``) must stay inside it: an absolute path or one that climbs out is refused before the
getter runs, since the getters run as the runner's user (root, for desktops).
Getters that drive the browser over DevTools are refused with one line where the door cannot
reach it. Getters are synchronous and run in a thread.
"""

from __future__ import annotations

import copy
import functools
import os
import shutil
from dataclasses import dataclass
from typing import Any

from core.trajectory import GetterSpec
from environments.tasks.context import TaskContext, resolve_local
from environments.tasks.door import Endpoint
from environments.tasks.errors import TaskRunError, UnsupportedGetter
from environments.tasks.official import (
    getter,
    getter_modules,
    getter_unsupported_reason,
    python_controller_class,
    reads_attribute,
)

__all__ = [
    "GETTER_RETRY_SCALE_ENV",
    "REFUSED_GETTERS",
    "OfficialEnv",
    "get_state",
    "getter_refusal",
    "getter_supported",
    "official_env",
]

#: Getter types OSWorld has but this runner does not run, and why.
REFUSED_GETTERS = {
    "googledrive_file": "it needs a Google account and network access",
    "replay": "it types a recorded trajectory into the desktop instead of reading a state",
}


@dataclass
class OfficialEnv:
    """The part of OSWorld's ``DesktopEnv`` its getters read."""

    controller: Any
    setup_controller: Any
    vm_ip: str
    server_port: int
    chromium_port: int
    vlc_port: int
    cache_dir: str
    current_use_proxy: bool = False

    @property
    def vm_platform(self) -> str:
        return str(self.controller.get_vm_platform())

    @property
    def vm_screen_size(self) -> Any:
        return self.controller.get_vm_screen_size()


#: Multiplies the wait between OSWorld's controller's attempts (5 s, three attempts: a missing
#: result file costs 15 s); the test suite sets it low. The attempts themselves are kept.
GETTER_RETRY_SCALE_ENV = "AGENT_S3_GETTER_RETRY_SCALE"


def _retry_scale() -> float:
    text = os.environ.get(GETTER_RETRY_SCALE_ENV, "1")
    try:
        scale = float(text)
    except ValueError:
        scale = -1.0
    if not scale >= 0:  # also NaN
        raise ValueError(f"{GETTER_RETRY_SCALE_ENV}={text!r} is not a number >= 0: unset it or give one (1 is OSWorld's wait)")
    return scale


def official_env(endpoint: Endpoint, ctx: TaskContext, setup_controller: Any = None) -> OfficialEnv:
    controller = python_controller_class()(endpoint.host, endpoint.port)
    controller.retry_interval = controller.retry_interval * _retry_scale()
    return OfficialEnv(
        controller=controller,
        setup_controller=setup_controller,
        vm_ip=endpoint.host,
        server_port=endpoint.port,
        chromium_port=endpoint.chromium_port,
        vlc_port=endpoint.vlc_port,
        cache_dir=str(ctx.cache_dir),
        current_use_proxy=ctx.use_proxy,
    )


@functools.cache
def _needs_browser(getter_type: str) -> bool:
    return reads_attribute(getter_type, "chromium_port")


def getter_refusal(getter_type: str, endpoint: Endpoint | None = None) -> str | None:
    """Why getter `getter_type` cannot run here (None if it can); with an endpoint, also its reach."""
    if getter_type in REFUSED_GETTERS:
        return REFUSED_GETTERS[getter_type]
    reason = getter_unsupported_reason(getter_type)
    if reason is not None:
        return reason
    if endpoint is not None and endpoint.browser_unreachable and _needs_browser(getter_type):
        return endpoint.browser_unreachable
    return None


def getter_supported(getter_type: str) -> bool:
    return getter_refusal(getter_type) is None


def getter_types() -> list[str]:
    """Every getter type OSWorld's package defines."""
    return sorted(getter_modules())


#: Fields OSWorld's getters join to ``cache_dir`` (where an absolute path or ``..`` would
#: take them out of it): every getter's ``dest``, and the file ``cache_file`` reads.
_CACHE_NAMES = {"cache_file": ("path", "dest")}


def _seed_cloud_files(params: dict[str, Any], ctx: TaskContext) -> None:
    """Put each ``cloud_file`` URL's local copy at ``cache_dir/<dest>``, where the getter looks first."""
    multi = bool(params.get("multi", False))
    urls = params["path"] if multi else [params["path"]]
    dests = params["dest"] if multi else [params["dest"]]
    for url, dest in zip(urls, dests, strict=True):
        source = resolve_local(ctx, str(url), str(dest))
        target = ctx.cache_path(str(dest))
        if source != target:
            shutil.copyfile(source, target)


def get_state(env: OfficialEnv, spec: GetterSpec | None, ctx: TaskContext) -> Any:
    """The value `spec` describes, by OSWorld's getter, or ``None`` when there is no spec (blocking)."""
    if spec is None:
        return None
    reason = getter_refusal(spec.type)
    if reason is not None:
        raise UnsupportedGetter(ctx.task_id, spec.type, reason)
    params = copy.deepcopy(spec.params)  # OSWorld's getters may change it; the record is shared
    try:
        for key in _CACHE_NAMES.get(spec.type, ("dest",)):
            for name in params[key] if isinstance(params.get(key), list) else [params.get(key)]:
                if name is not None and not isinstance(name, str):
                    raise TaskRunError(f"task {ctx.task_id}: getter {spec.type!r} field {key!r} must be a file name")
                if isinstance(name, str):
                    ctx.cache_path(name)  # refuses names that climb out of the cache
        if spec.type == "cloud_file":
            _seed_cloud_files(params, ctx)
    except KeyError as exc:
        raise TaskRunError(f"task {ctx.task_id}: getter {spec.type!r} lacks field {exc}") from None
    return getter(spec.type).fn(env, {"type": spec.type} | params)
