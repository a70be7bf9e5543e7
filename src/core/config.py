"""Configuration in layers: a pydantic model per component, YAML run files, dotted overrides.

The caller owns the root model (a pydantic model whose fields are the components' models).
Sources apply in order, later ones winning::

    cfg = load_config(RunConfig, ["run.yaml", "rollouts=10", "judge.model=openai/gpt-5"])

A source is a YAML (or JSON) file, a ``dotted.key=value`` override whose value is read as a
YAML scalar, list or mapping (``rollouts=10``, ``models=[a/b, c/d]``), or a mapping given in
code. Lists and scalars replace; mappings merge key by key. A key the model does not have
is one clear error that names it and the valid choices, whichever source it came from. A
section whose model names its variants (a ``config_variants()`` classmethod, as the
environment kinds' settings do) accepts the keys of any of them; the model's own validation
then refuses a key that the variant chosen does not have.

`dump_config` gives the resolved configuration whole, as JSON, with secrets replaced by
``REDACTED``: fields typed SecretStr/SecretBytes and keys named like api_key, secret, token
or password. Loading that dump back (``-c runs/<id>/config.json``) rebuilds the run; the
redacted entries are skipped, so secrets come from their defaults (e.g. the environment)
again rather than becoming the literal marker.

Credentials inside a URL (``https://user:key@host/v1``) are secrets in a field that is not
named like one: `dump_config` and `redact_urls` replace the user-info part, and loading a
dump whose URL lost its credentials that way asks for the URL again rather than calling
the host without them.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, GetCoreSchemaHandler, SecretBytes, SecretStr, ValidationError
from pydantic_core import PydanticCustomError, core_schema

__all__ = [
    "OVERRIDE_FORM",
    "REDACTED",
    "Checks",
    "ConfigError",
    "dump_config",
    "is_secret_key",
    "load_config",
    "merge_source",
    "redact_urls",
]

M = TypeVar("M", bound=BaseModel)

REDACTED = "<redacted>"

#: A ``dotted.key=value`` override (anything else given as a source is a file).
OVERRIDE_FORM = re.compile(r"^([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)=(.*)$", re.DOTALL)
_SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "secret",
        "token",
        "apikey",
        "credential",
        "credentials",
        "authorization",
        "cookie",
    }
)
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key")})
# scheme://userinfo@ : the user-info part of a URL (RFC 3986 3.2.1) carries credentials.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#@\s]+)@")


class ConfigError(ValueError):
    """A configuration the user wrote is wrong; the message says where and what to do."""


#: Chooses the model that checks a section from the section's other fields (validated
#: before it): the registered part its ``name`` names, or always the same model.
ModelOf = Callable[[Mapping[str, Any]], "type[BaseModel] | None"]


@dataclass(frozen=True)
class Checks:
    """The mark of a mapping-typed configuration field whose keys a model checks at load,
    as in ``options: Annotated[dict[str, Any], Checks(options_of_named)]``: the field keeps
    what the user wrote (recorded and compared on resume as written), and a bad key or value
    is refused when the configuration is loaded, in one line naming its path and the keys
    there are. `model_of` reads the model from the section's other fields (a guide's or
    critic's ``Options`` by its ``name``); None checks nothing. `each`: the field maps names
    to entries (``models.<provider/model>``), or lists them, each checked by the model. `partial`: the
    entries are merged over defaults elsewhere, so a missing required field is no error.
    `checker` names the check for the configuration page; `noun`, what the error calls the
    model's fields ("options")."""

    model_of: ModelOf
    checker: str
    each: bool = False
    partial: bool = False
    noun: str = "keys"
    #: For the configuration page: (label, model) of each shape the section may take (one per
    #: registered name; None: the one `model_of` gives), and how an entry's path continues
    #: (``""``: the model's keys, ``.<provider/model>``, ``[]``).
    variants: Callable[[], list[tuple[str, type[BaseModel]]]] | None = None
    label: str = "its keys"
    key: str = ""

    def shapes(self) -> list[tuple[str, type[BaseModel]]]:
        """(label, model) of each shape the section may take, for the configuration page."""
        if self.variants is not None:
            return self.variants()
        model = self.model_of({})
        return [(self.label, model)] if model is not None else []

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.with_info_after_validator_function(self.check, handler(source))

    def check(self, value: Any, info: core_schema.ValidationInfo) -> Any:
        model = self.model_of(info.data)
        if model is None or not isinstance(value, Mapping | list) or (isinstance(value, list) and not self.each):
            return value
        if isinstance(value, list):  # entries by index; a string entry is read by its own parser later
            entries: Iterable[tuple[Any, Any]] = [(k, e) for k, e in enumerate(value) if isinstance(e, Mapping)]
        else:
            entries = value.items() if self.each else [((), value)]
        for key, entry in entries:
            try:
                model.model_validate(entry)
            except ValidationError as e:
                errors = [err for err in e.errors() if not (self.partial and err["type"] == "missing")]
                if errors:
                    first = errors[0]
                    where = "".join(f".{p}" for p in (*((key,) if self.each else ()), *first["loc"]))
                    name = info.data.get("name")
                    named = f" for {name}" if isinstance(name, str) else ""
                    raise PydanticCustomError("checked_section", "{why}", {
                        "why": f"{where}{named}: {first['msg'].removeprefix('Value error, ')}" + (
                            f" (its {self.noun}: {', '.join(model.model_fields)})"
                            if first["type"] == "extra_forbidden" and len(first["loc"]) <= 1 else "")}
                    ) from None
        return value


def load_config(model: type[M], sources: Iterable[str | Path | Mapping[str, Any]]) -> M:
    """Apply `sources` in order over the model's defaults and validate the result."""
    data: dict[str, Any] = {}
    for source in sources:
        data = merge_source(model, data, source)
    _refuse_redacted_urls(data, ())
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def merge_source(
    model: type[BaseModel], data: dict[str, Any], source: str | Path | Mapping[str, Any]
) -> dict[str, Any]:
    """`data` with one more source applied; keys are checked against `model`."""
    if isinstance(source, Mapping):
        layer, origin = dict(source), "a mapping given in code"
    elif isinstance(source, str) and (match := OVERRIDE_FORM.match(source)):
        key, text = match.group(1), match.group(2)
        value = _override_value(model, key, text)
        shown = REDACTED if any(is_secret_key(part) for part in key.split(".")) else redact_urls(text)
        layer, origin = _nest(key.split("."), value), f"override {key}={shown}"
    else:
        path = Path(source)
        layer, origin = _read_file(path), str(path)
    layer = _drop_redacted(layer)
    _check_keys(model, layer, (), origin)
    return deep_merge(data, layer)


def redact_urls(text: str) -> str:
    """`text` with the credentials of every URL in it (``user:password@``) replaced."""
    return _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)


def dump_config(config: BaseModel) -> dict[str, Any]:
    """The whole resolved configuration as JSON-ready data, secrets redacted."""
    plain = config.model_dump(mode="python")
    as_json = config.model_dump(mode="json")
    return _redact(plain, as_json)


def is_secret_key(name: str) -> bool:
    """Whether a key's name says its value is a secret (``api_key``, ``aws_secret_access_key``,
    ``auth_token``, ``password`` ...; not ``max_tokens``)."""
    words = [w for w in re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()) if w]
    if any(w in _SECRET_WORDS for w in words):
        return True
    return any(pair in _SECRET_PAIRS for pair in pairwise(words))


# -- reading sources ---------------------------------------------------------------------


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"config file {path} not found (a -c value is a YAML file or a dotted key=value override)"
        ) from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc}") from None
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" line {where.line + 1}" if where is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ConfigError(f"config file {path}{line}: {problem}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping of keys to values")
    return loaded


def _override_value(model: type[BaseModel], key: str, text: str) -> Any:
    """The override's value: its raw text for a plain string field, else parsed YAML."""
    fields = _fields_at(model, key.split("."))
    if fields is not None and _is_plain_str(fields):
        return text
    try:
        return yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError:
        raise ConfigError(
            f"override {key}={text}: the value is not a valid YAML scalar, list or mapping"
        ) from None


def _nest(keys: list[str], value: Any) -> dict[str, Any]:
    out: Any = value
    for key in reversed(keys):
        out = {key: out}
    return out


def _drop_redacted(layer: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in layer.items():
        if value == REDACTED:
            continue
        out[key] = _drop_redacted(value) if isinstance(value, dict) else value
    return out


def _refuse_redacted_urls(data: Any, where: tuple[str, ...]) -> None:
    """A URL whose credentials a dump redacted cannot be used: ask for it again."""
    if isinstance(data, dict):
        for key, value in data.items():
            _refuse_redacted_urls(value, (*where, str(key)))
    elif isinstance(data, list):
        for n, value in enumerate(data):
            _refuse_redacted_urls(value, (*where, str(n)))
    elif isinstance(data, str) and f"://{REDACTED}@" in data:
        dotted = ".".join(where)
        raise ConfigError(
            f"config key '{dotted}' is a URL whose credentials were redacted when it was saved: "
            f"give it again with -c {dotted}=URL"
        )


def deep_merge(base: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `layer`'s keys over it; where both hold a mapping, they merge key by key."""
    out = dict(base)
    for key, value in layer.items():
        known = out.get(key)
        out[key] = deep_merge(known, value) if isinstance(value, Mapping) and isinstance(known, Mapping) else value
    return out


def layered(base: Mapping[str, Any], file: Path | None, overrides: Mapping[str, Any] | None,
            *, what: str) -> dict[str, Any]:
    """Bundled figures `base`, then a YAML `file`'s keys, then `overrides`, merged deep;
    `what` names the mapping in the one-line error for a file that is not one."""
    data = dict(base)
    if file is not None:
        extra = yaml.safe_load(Path(file).read_text()) or {}
        if not isinstance(extra, dict):
            raise ValueError(f"{file}: {what} is a mapping")
        data = deep_merge(data, extra)
    return deep_merge(data, overrides) if overrides else data


# -- checking keys against the model -----------------------------------------------------


def _sections(annotation: Any, layer: Any = None) -> tuple[list[type[BaseModel]], bool]:
    """The model types a field's value may be, and whether it is a free-form mapping (a
    tagged union's variants are asked with the `layer` being checked: it may name one that
    is imported on first use, as a dotted path does)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _sections(get_args(annotation)[0], layer)
    if origin in (Union, types.UnionType):
        models: list[type[BaseModel]] = []
        free = False
        for arg in get_args(annotation):
            sub, sub_free = _sections(arg, layer)
            models += sub
            free = free or sub_free
        return models, free
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        variants = getattr(annotation, "config_variants", None)  # a tagged union decided at validation
        return (list(variants(layer)) if callable(variants) else [annotation]), False
    if origin in (dict, Mapping) or annotation in (dict, Any):
        return [], True
    return [], False


def _field_names(models: list[type[BaseModel]]) -> dict[str, Any]:
    """Accepted key → annotation over the models a section may be (names and aliases)."""
    names: dict[str, Any] = {}
    for m in models:
        for name, info in m.model_fields.items():
            names.setdefault(name, info.annotation)
            if info.alias:
                names.setdefault(info.alias, info.annotation)
    return names


def _check_keys(
    model: type[BaseModel], layer: Mapping[str, Any], prefix: tuple[str, ...], origin: str
) -> None:
    _check_section([model], layer, prefix, origin)


def _check_section(
    models: list[type[BaseModel]], layer: Mapping[str, Any], prefix: tuple[str, ...], origin: str
) -> None:
    names = _field_names(models)
    for key, value in layer.items():
        dotted = ".".join((*prefix, str(key)))
        if key not in names:
            where = f"in '{'.'.join(prefix)}'" if prefix else "at the top level"
            valid = ", ".join(sorted(names)) or "(none)"
            raise ConfigError(f"unknown config key '{dotted}' (from {origin}); valid keys {where}: {valid}")
        sub_models, free = _sections(names[key], value if isinstance(value, Mapping) else None)
        if isinstance(value, Mapping) and sub_models and not free:
            _check_section(sub_models, value, (*prefix, str(key)), origin)
        elif isinstance(value, Mapping) and not sub_models and not free and origin.startswith("override"):
            inner = ".".join((dotted, str(next(iter(value)))))
            raise ConfigError(
                f"config key '{dotted}' is a single value, so '{inner}' cannot be set (from {origin})"
            )


def _fields_at(model: type[BaseModel], keys: list[str]) -> Any | None:
    """The annotation at a dotted path, or None when it does not lead to a field."""
    models: list[type[BaseModel]] = [model]
    annotation: Any = None
    for key in keys:
        names = _field_names(models)
        if key not in names:
            return None
        annotation = names[key]
        models, _free = _sections(annotation)
    return annotation


def _is_plain_str(annotation: Any) -> bool:
    if annotation is str:
        return True
    if get_origin(annotation) is Annotated:
        return _is_plain_str(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return len(args) == 1 and _is_plain_str(args[0])
    return False


# -- output ------------------------------------------------------------------------------


def _redact(plain: Any, as_json: Any) -> Any:
    if isinstance(plain, SecretStr | SecretBytes):
        return REDACTED
    if isinstance(plain, dict) and isinstance(as_json, dict):
        out: dict[str, Any] = {}
        for key, value in as_json.items():
            if is_secret_key(str(key)) and value not in (None, ""):
                out[key] = REDACTED
            else:
                out[key] = _redact(plain.get(key), value)
        return out
    if isinstance(plain, list | tuple) and isinstance(as_json, list) and len(plain) == len(as_json):
        return [_redact(p, j) for p, j in zip(plain, as_json, strict=True)]
    if isinstance(as_json, str):
        return redact_urls(as_json)
    return as_json


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:3]:
        where = ".".join(str(p) for p in error["loc"]) or "(top level)"
        secret = any(is_secret_key(str(p)) for p in error["loc"])
        got = REDACTED if secret else redact_urls(repr(error.get("input")))
        got = got if len(got) <= 60 else got[:57] + "..."
        if error["type"] == "checked_section":  # the path within the section and the keys there are
            parts.append(f"{where}{error['msg']}")
        elif error["type"] == "missing":
            parts.append(f"{where}: required, set it in a run file or with -c {where}=...")
        else:
            parts.append(f"{where}: {error['msg']} (got {got})")
    more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
    return "invalid config: " + "; ".join(parts) + more
