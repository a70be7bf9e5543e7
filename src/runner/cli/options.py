"""The options every command shares: the options given laid over the configuration, and the
environment options derived from the registered kinds.

`option_overrides` turns the options given into a nested mapping over the configuration
(``rollout__max_steps`` sets ``rollout.max_steps``); options left out (None) are not set.

``--env`` offers every registered kind (read when the command runs, so a kind registered
after the command line was built is offered too) and its help names each with its
description; the options that set one kind's settings (``--url``, ``--image``, ...) take
their help from that setting's own docstring (`environments.kinds.field_help`), and a
setting the chosen kind does not have is refused by the configuration's validation.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from core.registry import PATH_FORM, is_path
from core.trajectory import RunLayout
from environments.kinds import describe_kinds, field_help, get_kind, kind_names

from .errors import fail

__all__ = [
    "ENV_HELP",
    "AdbHost",
    "AdbPort",
    "Configs",
    "EnvKind",
    "Image",
    "Network",
    "OutDir",
    "PolicyBaseUrl",
    "Preset",
    "Settle",
    "Token",
    "Url",
    "env_option",
    "environment_overrides",
    "option_overrides",
    "parse_kind",
    "run_folder",
]

ENV_HELP = f"Where the rollouts run: {describe_kinds()}, or {PATH_FORM} (an EnvironmentKind) of your own."


def parse_kind(value: str) -> str:
    """``--env``'s value: a kind registered when the command runs, or a dotted path
    ``package.module:KIND`` to one of your own."""
    if is_path(value):
        try:
            get_kind(value)
        except KeyError as e:
            raise typer.BadParameter(str(e.args[0])) from None
        return value
    known = kind_names()
    if value not in known:
        raise typer.BadParameter(f"{value!r} is not an environment kind: use one of {', '.join(known)}, "
                                 f"or a dotted path {PATH_FORM} of your own")
    return value


def env_option(help: str = ENV_HELP) -> Any:
    """The ``--env`` option (a registered kind's name, or a dotted path to a kind)."""
    return typer.Option("--env", help=help, parser=parse_kind, metavar="KIND")


# The options several commands share, declared once (``name: Url = None`` in a command).
EnvKind = Annotated[str | None, env_option(help=ENV_HELP)]
Url = Annotated[str | None, typer.Option("--url", help=field_help("url"))]
Token = Annotated[str | None, typer.Option("--token", help=field_help("token"))]
Image = Annotated[str | None, typer.Option("--image", help=field_help("image"))]
Network = Annotated[str | None, typer.Option("--network", help=field_help("network"))]
AdbHost = Annotated[str | None, typer.Option("--adb-host", help=field_help("adb_host"))]
AdbPort = Annotated[int | None, typer.Option("--adb-port", min=1, max=65535, help=field_help("adb_port"))]
PolicyBaseUrl = Annotated[str | None, typer.Option("--base-url", help="Endpoint of the policy model's server.")]
Configs = Annotated[list[str] | None, typer.Option("-c", "--config", help="A run YAML file or a key=value override; "
                                                   "repeatable, later wins.")]
Preset = Annotated[str | None, typer.Option("--preset", help="A preset of presets/ by name (e.g. s3-osworld), read "
                                            "before any -c.")]
OutDir = Annotated[Path | None, typer.Option("--out", help="Folder for run folders (default runs/).")]
Settle = Annotated[float | None, typer.Option("--settle", help="Seconds to wait after each action.")]


def environment_overrides(**given: Any) -> dict[str, Any]:
    """``environment__<setting>`` overrides for the options that were given (None: not given)."""
    return {f"environment__{name}": value for name, value in given.items() if value is not None}


def option_overrides(options: Mapping[str, Any] | None = None, /, **named: Any) -> dict[str, Any]:
    """The options given, by mapping or by name, as a nested mapping over the config."""
    out: dict[str, Any] = {}
    for dotted, value in {**(options or {}), **named}.items():
        if value is None:
            continue
        node = out
        *parents, last = dotted.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return out


def run_folder(path: Path, *, exists: bool = True) -> RunLayout:
    """The run folder a command was given (``RUN_DIR``); one that is not a folder is refused in
    one line, unless `exists` is False (a folder the command is about to make)."""
    path = path.expanduser().resolve()
    if exists and not path.is_dir():
        raise fail(f"{path} is not a run folder: pass the folder `agent-s3 run` or `agent-s3 bench` printed "
                   "(runs/<run_id>)")
    return RunLayout(path.parent, path.name)
