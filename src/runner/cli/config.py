"""``agent-s3 config``: the run configuration as a user reads it.

``config show [-c FILE|key=value ...] [--preset NAME] [SECTION ...] [--changed] [--json]`` prints the configuration a
run given the same layers would get: every field's value, its source (default, preset, file,
flag) and its one-line doc. ``config doc`` prints ``docs/configuration.md``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated

import typer

from core.config import ConfigError
from core.protocols import EnvError

from ..config_doc import configuration_page
from ..config_show import attribute, layers_of, shown_fields
from .errors import fail
from .options import Configs, Preset

__all__ = ["config_app"]

config_app = typer.Typer(help="The run configuration: every field resolved, with its source and doc.",
                         no_args_is_help=True)


@config_app.command("show")
def show(
    sections: Annotated[list[str] | None, typer.Argument(help="Only fields under these dotted paths, e.g. guide or rollout.max_steps.")] = None,
    config: Configs = None, preset: Preset = None,
    changed: Annotated[bool, typer.Option("--changed", help="Only fields that are not at their default.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list of {path, value, source, doc} instead.")] = False,
) -> None:
    """Print the resolved run configuration: key, value, source and the field's doc."""
    try:
        rows = shown_fields(attribute(layers_of(config or [], preset)))
    except (ConfigError, EnvError, KeyError, ValueError) as e:
        raise fail(str(e).strip('"')) from None
    for section in sections or []:
        if not any(r.path == section or r.path.startswith(section + ".") for r in rows):
            raise fail(f"no field {section!r} in the run configuration (see docs/configuration.md)")
    if sections:
        rows = [r for r in rows if any(r.path == s or r.path.startswith(s + ".") for s in sections)]
    if changed:
        rows = [r for r in rows if r.source != "default"]
    if as_json:
        typer.echo(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))
        return
    key_w = max((len(r.path) for r in rows), default=0)
    value_w = min(max((len(r.value) for r in rows), default=0), 32)  # a longer value pushes its line
    source_w = max((len(r.source) for r in rows), default=0)
    for r in rows:
        line = f"{r.path:<{key_w}}  {r.value:<{value_w}}  {r.source:<{source_w}}  {r.doc}"
        typer.echo(line.rstrip())


@config_app.command("doc")
def doc() -> None:
    """Print docs/configuration.md, generated from the models (redirect it to that file)."""
    typer.echo(configuration_page(), nl=False)
