"""The run configuration's fields as a reader sees them: dotted path, type, default, one-line doc.

`tables` walks `RunConfig` and every model under it, including the sections whose type is a
plain mapping but whose keys another model checks when the configuration is loaded (its
`core.config.Checks` mark: ``guide.options`` by the guide's ``Options``, ``environment.fleet``
by `aws.FleetConfig`, ...; see `checked_elsewhere`). A
model met again at another path (every ``ModelConfig`` after ``policy``) is documented once
and referred to. Both ``docs/configuration.md`` (`runner.config_doc`) and ``agent-s3 config
show`` (`runner.config_show`) read their words from here, so a new field is documented
wherever it appears as soon as its model gives it a docstring.
"""

from __future__ import annotations

import enum
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, SecretBytes, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from core.config import Checks
from core.registry import Named
from environments.kinds import DEFAULT_KIND, kind_names

from .config import RunConfig

__all__ = ["CHECKED_ELSEWHERE", "Checked", "Row", "Table", "checked_elsewhere", "field_doc", "one_line", "render",
           "tables", "type_text"]


@dataclass(frozen=True)
class Checked:
    """A mapping- or list-typed field whose entries a model checks elsewhere."""

    checker: str
    """Where the check happens, e.g. ``gprm.guide.guide_options_model``."""
    variants: Callable[[], list[tuple[str, type[BaseModel]]]]
    """(label, model) pairs: one per registered guide or critic, or one for the entries."""
    key: str = ""
    """How an entry's path continues: ``""`` (keys of the model itself), ``.<provider/model>``, ``[]``."""
    at_load: bool = False
    """Checked when the configuration is loaded (the field is marked `core.config.Checks`)."""


#: (model, field name) -> how its untyped entries are checked, for a field whose check is not
#: a `core.config.Checks` mark on the field itself (none left: every one is marked).
CHECKED_ELSEWHERE: dict[tuple[type[BaseModel], str], Checked] = {}


def checked_elsewhere(model: type[BaseModel], name: str) -> Checked | None:
    """How the untyped entries of `model`'s field `name` are checked: its `Checks` mark (the
    model that checks it at load, and the shapes it may take), or a `CHECKED_ELSEWHERE`
    entry; None for a field whose type says it all. A new untyped mapping in the run
    configuration must have one (a test says so), so the page documents its keys."""
    info = model.model_fields.get(name)
    mark = next((m for m in info.metadata if isinstance(m, Checks)), None) if info is not None else None
    if mark is not None:
        return Checked(mark.checker, mark.shapes, key=mark.key, at_load=True)
    return CHECKED_ELSEWHERE.get((model, name))


_SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)(?<!\betc)\.\s+(?=[A-Z`(])")


@dataclass(frozen=True)
class Row:
    """One field of a table."""

    path: str
    type: str
    default: str
    doc: str


@dataclass
class Table:
    """The fields of one model at one path."""

    path: str
    model: type[BaseModel]
    title: str
    about: str
    rows: list[Row] = field(default_factory=list)


def one_line(text: str | None) -> str:
    """The first sentence or line of a docstring, whitespace folded."""
    if not text:
        return ""
    folded = " ".join(text.split())
    end = _SENTENCE_END.search(folded)
    return folded[: end.start() + 1] if end else folded


def field_doc(info: FieldInfo) -> str:
    return " ".join((info.description or "").split())


def render(value: Any, limit: int = 60) -> str:
    """A value as one would write it after ``-c key=`` (YAML flow style), long ones shortened."""
    if isinstance(value, SecretStr | SecretBytes):
        return "<redacted>"
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, Path | enum.Enum):
        value = str(value.value if isinstance(value, enum.Enum) else value)
    if isinstance(value, tuple):
        value = list(value)
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False).strip()
    text = text.removesuffix("...").strip()
    if len(text) > limit and isinstance(value, dict | list):
        return f"({len(value)} entries)"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def type_text(annotation: Any) -> str:
    """A field's type in a reader's words: ``int``, ``float | null``, ``"a" | "b"``."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return type_text(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        parts = [type_text(a) for a in get_args(annotation)]
        return " | ".join(dict.fromkeys(parts))
    if origin is Literal:
        return " | ".join(render(a) for a in get_args(annotation))
    if annotation is type(None):
        return "null"
    if annotation in (SecretStr, SecretBytes):
        return "secret"
    if origin is not None:
        args = ", ".join(type_text(a) for a in get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def _field_type(info: FieldInfo) -> str:
    """`type_text`, or the names a registry-named field takes (``Annotated[str, JUDGES.named()]``)."""
    named = next((m for m in info.metadata if isinstance(m, Named)), None)
    return named.choices() if named is not None else type_text(info.annotation)


def _default(info: FieldInfo) -> str:
    if info.default is PydanticUndefined and info.default_factory is None:
        return "(required)"
    value = info.get_default(call_default_factory=True, validated_data={})
    return "" if isinstance(value, BaseModel) else render(value)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The model types a field's value may be (``X | None`` and ``Annotated`` unwrapped)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _models_in(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for a in get_args(annotation) for m in _models_in(a)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _dict_values(annotation: Any) -> list[type[BaseModel]]:
    """``dict[str, M]``: the models M of its values."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _dict_values(get_args(annotation)[0])
    if origin in (dict, Mapping):
        return _models_in(get_args(annotation)[1])
    return []


def tables(root: type[BaseModel] = RunConfig) -> list[Table]:
    """Every table of the configuration page, in reading order."""
    out: list[Table] = []
    seen: dict[type[BaseModel], str] = {}
    _walk(root, "", one_line(root.__doc__), out, seen, exclude=())
    return out


def _walk(model: type[BaseModel], path: str, about: str, out: list[Table], seen: dict[type[BaseModel], str],
          *, exclude: tuple[str, ...], title: str | None = None, into: Table | None = None) -> None:
    seen.setdefault(model, path)
    table = into or Table(path, model, title or (f"`{path}`" if path else "Top level"), about)
    if into is None:
        out.append(table)
    later: list[Callable[[], None]] = []
    for name, info in model.model_fields.items():
        if name in exclude:
            continue
        dotted = f"{path}.{name}" if path else name
        models = _models_in(info.annotation)
        doc = field_doc(info) or (one_line(models[0].__doc__) if len(models) == 1 else "")
        checked = checked_elsewhere(model, name)
        if checked is not None:
            when = " when the configuration is loaded" if checked.at_load else ""
            doc += f" Checked{when} by {checked.checker}; its keys are listed below."
            later.append(_checked(checked, dotted, out, seen))
        elif len(models) == 1:
            sub = models[0]
            if sub in seen and getattr(sub, "config_variants", None) is None:
                doc += f" Fields as at `{seen[sub]}` ({sub.__name__})."
            else:
                later.append(_section(sub, dotted, doc, out, seen))
        elif (values := _dict_values(info.annotation)):
            doc += " Each entry's keys are listed below."
            later.append(_section(values[0], f"{dotted}.<key>", doc, out, seen))
        table.rows.append(Row(dotted, _field_type(info), _default(info), doc))
    for step in later:
        step()


def _section(model: type[BaseModel], path: str, doc: str, out: list[Table],
             seen: dict[type[BaseModel], str]) -> Callable[[], None]:
    def step() -> None:
        about = one_line(model.__doc__) or one_line(doc)
        variants = getattr(model, "config_variants", None)
        if not callable(variants):
            if model in seen:
                return
            _walk(model, path, about, out, seen, exclude=())
            return
        base = Table(path, model, f"`{path}`", about)
        out.append(base)
        _walk(model, path, about, out, seen, exclude=(), into=base)
        base.rows = [Row(r.path, " | ".join(kind_names()), DEFAULT_KIND, r.doc) if r.path == f"{path}.kind" else r
                     for r in base.rows]  # the tag: every registered kind, and the default one
        common = tuple(model.model_fields)
        for variant in variants():
            name = variant.model_fields["kind"].default
            _walk(variant, path, one_line(variant.__doc__), out, seen, exclude=common,
                  title=f"`{path}` with `kind: {name}`")
    return step


def _checked(checked: Checked, path: str, out: list[Table], seen: dict[type[BaseModel], str]) -> Callable[[], None]:
    def step() -> None:
        for label, model in checked.variants():
            title = f"`{path}{checked.key}` ({label})"
            _walk(model, f"{path}{checked.key}", one_line(model.__doc__), out, seen, exclude=(), title=title)
    return step
