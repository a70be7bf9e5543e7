"""What ``agent-s3 config show`` prints: the resolved run configuration, field by field,
each value with the layer it came from and its one-line doc.

The layers are those of a run (`runner.presets.with_preset`, then `load_run_config`); this
module only asks each layer, read alone by `core.config.merge_source` (so it is checked the
same way), which keys it sets. A key's source is the last layer that set it or a mapping
above it: ``default``, ``preset NAME``, ``file PATH`` or ``flag -c key=value``. A value no
layer set that differs from the field's default was filled in by the configuration itself
(``rollout.settle_seconds`` from the environment kind) and is shown as ``derived``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from core.config import OVERRIDE_FORM, REDACTED, dump_config, is_secret_key, merge_source, redact_urls
from gprm.guide import guide_options_model
from themis.critics import critic_options_model

from .config import RunConfig, load_run_config
from .config_fields import field_doc, one_line, render
from .presets import preset_path

__all__ = ["ShownField", "Sourced", "attribute", "describe_source", "shown_fields"]


@dataclass(frozen=True)
class ShownField:
    """One row of ``config show``."""

    path: str
    value: str
    source: str
    doc: str


@dataclass(frozen=True)
class Sourced:
    """A resolved configuration and, per dotted key a layer set, that layer's label."""

    config: RunConfig
    origins: dict[str, str]

    def source_of(self, path: str) -> str:
        """The label of the last layer that set `path`, a mapping above it or a key below it."""
        parts = path.split(".")
        for n in range(len(parts), 0, -1):
            found = self.origins.get(".".join(parts[:n]))
            if found is not None:
                return found
        below = [label for key, label in self.origins.items() if key.startswith(path + ".")]
        return below[-1] if below else "default"


def describe_source(source: str | Path, *, preset: str | None = None) -> str:
    """The label of one layer: ``preset NAME``, ``flag -c key=value`` or ``file PATH``."""
    if preset is not None:
        return f"preset {preset}"
    text = str(source)
    match = OVERRIDE_FORM.match(text) if isinstance(source, str) else None
    if match is None:
        return f"file {text}"
    key = match.group(1)
    shown = REDACTED if any(is_secret_key(p) for p in key.split(".")) else redact_urls(match.group(2))
    return f"flag -c {key}={shown}"


def attribute(layers: Sequence[tuple[str, str | Path | Mapping[str, Any]]]) -> Sourced:
    """The configuration the `layers` (label, source) give, with where each key came from."""
    origins: dict[str, str] = {}
    for label, source in layers:
        for key in _leaf_keys(merge_source(RunConfig, {}, source), ()):
            origins.pop(key, None)  # re-inserted last, so the latest layer is found last
            origins[key] = label
    return Sourced(load_run_config([source for _, source in layers]), origins)


def layers_of(config: Sequence[str], preset: str | None) -> list[tuple[str, str | Path | Mapping[str, Any]]]:
    """The command line's ``--preset`` and ``-c`` values as labelled layers, in a run's order."""
    first = [(describe_source("", preset=preset), str(preset_path(preset)))] if preset else []
    return [*first, *((describe_source(c), c) for c in config)]


def _leaf_keys(layer: Mapping[str, Any], prefix: tuple[str, ...]) -> Iterator[str]:
    for key, value in layer.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            yield from _leaf_keys(value, path)
        else:
            yield ".".join(path)


def shown_fields(sourced: Sourced) -> list[ShownField]:
    """Every field of the resolved configuration, in the models' order."""
    cfg = sourced.config
    return list(_fields(cfg, dump_config(cfg), "", sourced, _options_of(cfg)))


def _options_of(cfg: RunConfig) -> dict[str, BaseModel]:
    """The sections the run's models check elsewhere, resolved by those models (their
    defaults shown too): the guide's and critic's options, an EC2 fleet's settings."""
    out: dict[str, BaseModel] = {}
    for name, model in cfg.environment.checked_sections().items():
        out[f"environment.{name}"] = model
    if cfg.guide.name != "none":
        out["guide.options"] = guide_options_model(cfg.guide.name).model_validate(cfg.guide.options)
    out["critic.options"] = critic_options_model(cfg.critic.name).model_validate(cfg.critic.options)
    return out


def _fields(obj: BaseModel, data: Mapping[str, Any], prefix: str, sourced: Sourced,
            options: dict[str, BaseModel]) -> Iterator[ShownField]:
    for name, info in type(obj).model_fields.items():
        path = f"{prefix}.{name}" if prefix else name
        value = getattr(obj, name)
        if path in options:
            value = options[path]
            data = {**data, name: dump_config(value)}
        if isinstance(value, BaseModel):
            yield from _fields(value, data[name], path, sourced, options)
            continue
        source = sourced.source_of(path)
        shown = render(data[name], limit=100)
        if source == "default" and info.default_factory is None and render(info.default) != render(value):
            source = "derived"
        yield ShownField(path, shown, source, one_line(field_doc(info)).replace("``", "`"))
