"""What the pinned desktop-env's AWS provider does, read from its own source.

The fleet launches desktops as ``desktop_env/providers/aws/`` of the installed desktop-env
(1.0.2) does: the image table, the instance type, the network interface (public IP on, the
subnet and security group it refuses to start without), the root volume, the TTL defaults
and the cloud-side termination schedule, the proxy pool file and the ports its controllers
dial. Those values are read here from the package's files with `ast`, never imported: its
manager module raises at import without AWS variables and loads a ``.env`` into the
process. A test compares every field with what the fleet does, so a newer desktop-env
that changes one fails it rather than running another experiment silently.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["UpstreamAWS", "UpstreamMissing", "upstream"]

_DIST = "desktop-env"


class UpstreamMissing(RuntimeError):
    """desktop-env is not installed, or its AWS provider no longer has what the fleet reads."""


@dataclass(frozen=True)
class UpstreamAWS:
    """desktop-env's AWS settings, as its source states them."""

    version: str
    #: region -> "WxH" -> AMI (``IMAGE_ID_MAP``).
    images: dict[str, dict[str, str]]
    #: ``INSTANCE_TYPE`` of the allocation.
    instance_type: str
    #: The type a revert launches when the old instance's is unknown (after AWS_INSTANCE_TYPE).
    revert_fallback_type: str
    #: ``run_instances`` parameters of the allocation (non-literals as their source text).
    launch: dict[str, Any]
    #: Variables whose absence stops the provider before anything is launched.
    required_env: tuple[str, ...]
    ttl_minutes: int
    ttl_enabled: bool
    #: Environment variable -> default, for every ``os.getenv`` of the AWS provider and setup controller.
    env_defaults: dict[str, str | None]
    #: The EventBridge Scheduler target that terminates an instance.
    scheduler_target: str
    #: Name prefix of its schedules.
    schedule_prefix: str
    schedule_action_after_completion: str
    #: The proxy pool file `SetupController` loads (``PROXY_CONFIG_FILE``'s default).
    proxy_config_file: str
    #: The local port of the tinyproxy `_proxy_setup` starts in the VM.
    proxy_local_port: int
    #: Ports `DesktopEnv` gives its controllers (server, chromium, vnc, vlc).
    ports: dict[str, int]
    #: The noVNC port the AWS provider prints for its instances.
    aws_vnc_port: int
    #: `DesktopEnv`'s client password on AWS.
    aws_password: str

    @property
    def subnet_var(self) -> str:
        return "AWS_SUBNET_ID"

    @property
    def security_group_var(self) -> str:
        return "AWS_SECURITY_GROUP_ID"


def _root() -> Path:
    spec = importlib.util.find_spec("desktop_env")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise UpstreamMissing(f"{_DIST} is not installed: run scripts/setup.sh (it installs OSWorld's {_DIST} 1.0.2)")
    return Path(next(iter(spec.submodule_search_locations)))


def _tree(root: Path, relative: str) -> ast.Module:
    path = root / relative
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except OSError as exc:
        raise UpstreamMissing(f"{_DIST}'s {relative} cannot be read ({exc.strerror}): reinstall {_DIST}") from None


def _value(node: ast.AST) -> Any:
    """A literal's value; containers recursively; anything else as its source text."""
    if isinstance(node, ast.Dict):
        return {_value(k) if k is not None else "**": _value(v) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.List | ast.Tuple):
        items = [_value(e) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    try:
        return ast.literal_eval(node)
    except ValueError:
        return f"<{ast.unparse(node)}>"


def _assigned(tree: ast.Module, name: str, *, literal: bool = False) -> ast.AST:
    """The value first assigned to `name` (a variable or an attribute); with `literal`, the
    first literal one (``self.server_port = 5000``, not a later computed reassignment)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            named = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None
            if named == name and (not literal or isinstance(value, ast.Constant)):
                return value
    raise UpstreamMissing(f"{_DIST} no longer assigns {name}: the fleet's comparison needs updating")


def _getenv_calls(tree: ast.Module) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "getenv" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            default = node.args[1] if len(node.args) > 1 else None
            value = str(default.value) if isinstance(default, ast.Constant) and default.value is not None else None
            if node.args[0].value not in found or value is not None:
                found[node.args[0].value] = value
    return found


def _required(tree: ast.Module) -> tuple[str, ...]:
    """Variables tested by module-level ``if not os.getenv(...): raise``."""
    out: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.If) and any(isinstance(s, ast.Raise) for s in node.body):
            out += [n for n in _getenv_calls(ast.Module(body=[ast.Expr(node.test)], type_ignores=[]))]
    return tuple(out)


def _launch(tree: ast.Module) -> dict[str, Any]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_allocate_vm":
            value = _assigned(ast.Module(body=node.body, type_ignores=[]), "run_instances_params")
            params = _value(value)
            if isinstance(params, dict):
                return params
    raise UpstreamMissing(f"{_DIST}'s _allocate_vm no longer builds run_instances_params")


def _revert_fallback(tree: ast.Module) -> str:
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and "AWS_INSTANCE_TYPE" in ast.unparse(node):
            last = node.values[-1]
            if isinstance(last, ast.Constant) and isinstance(last.value, str):
                return last.value
    raise UpstreamMissing(f"{_DIST}'s revert_to_snapshot no longer falls back to an instance type")


def _constant(tree: ast.Module, pattern: str) -> str:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(pattern, node.value):
            return node.value
    raise UpstreamMissing(f"{_DIST} no longer has a string matching {pattern!r}")


def _keyword(tree: ast.Module, call: str, keyword: str) -> Any:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == call:
            for kw in node.keywords:
                if kw.arg == keyword:
                    return _value(kw.value)
    raise UpstreamMissing(f"{_DIST} no longer calls {call}({keyword}=...)")


def _int(text: str | None, what: str) -> int:
    try:
        return int(text or "")
    except ValueError:
        raise UpstreamMissing(f"{_DIST}'s {what} default {text!r} is not a number") from None


@functools.cache
def upstream() -> UpstreamAWS:
    """desktop-env's AWS settings (read once); `UpstreamMissing` says what to install."""
    root = _root()
    try:
        version = importlib.metadata.version(_DIST)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    manager, provider = _tree(root, "providers/aws/manager.py"), _tree(root, "providers/aws/provider.py")
    config, scheduler = _tree(root, "providers/aws/config.py"), _tree(root, "providers/aws/scheduler_utils.py")
    setup, env = _tree(root, "controllers/setup.py"), _tree(root, "desktop_env.py")
    image_map = _value(_assigned(manager, "IMAGE_ID_MAP"))
    images = {region: {f"{w}x{h}": ami for (w, h), ami in sizes.items()} for region, sizes in image_map.items()}
    env_defaults: dict[str, str | None] = {}
    for tree in (manager, provider, config, scheduler, setup):
        for var, default in _getenv_calls(tree).items():
            if var not in env_defaults or default is not None:
                env_defaults[var] = default
    proxy_server = _constant(setup, r"--proxy-server=http://127\.0\.0\.1:\d+")
    vnc = re.search(r":(\d+)/vnc\.html", ast.unparse(manager))
    ports = {name: _value(_assigned(env, f"{name}_port", literal=True)) for name in ("server", "chromium", "vnc", "vlc")}
    password = _constant(env, r"^osworld-public-evaluation$")
    return UpstreamAWS(
        version=version,
        images=images,
        instance_type=str(_value(_assigned(manager, "INSTANCE_TYPE"))),
        revert_fallback_type=_revert_fallback(provider),
        launch=_launch(manager),
        required_env=_required(manager),
        ttl_minutes=_int(env_defaults.get("DEFAULT_TTL_MINUTES"), "DEFAULT_TTL_MINUTES"),
        ttl_enabled=(env_defaults.get("ENABLE_TTL") or "").lower() == "true",
        env_defaults=env_defaults,
        scheduler_target=_constant(scheduler, r"^arn:aws:scheduler:::aws-sdk:ec2:"),
        schedule_prefix=_constant(scheduler, r"^osworld-ttl-$"),
        schedule_action_after_completion=str(_keyword(scheduler, "create_schedule", "ActionAfterCompletion")),
        proxy_config_file=str(_getenv_calls(setup).get("PROXY_CONFIG_FILE")),
        proxy_local_port=int(proxy_server.rsplit(":", 1)[1]),
        ports={k: int(v) for k, v in ports.items()},
        aws_vnc_port=int(vnc.group(1)) if vnc else 0,
        aws_password=password,
    )
