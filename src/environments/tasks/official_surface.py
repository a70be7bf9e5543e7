"""What OSWorld's own package (`desktop-env`, pinned in `official`) offers, read from its source.

The support report must not keep a hand-written list of step types, getters and metrics:
it reads them from the pinned package. Step types are the ``_<type>_setup`` methods of
`desktop_env.controllers.setup.SetupController` (a method whose body only raises
`NotImplementedError` is listed as refused), getter types the ``get_<type>`` functions that
`desktop_env.evaluators.getters` exports, metrics `official.metric_modules()`. Nothing is
imported to find this out (the package's ``__init__`` files import torch and friends): the
source is parsed with `ast`.

Which Python packages a function needs follows the rule `official.metric` applies when it
loads a metric: the packages its module imports with ``from x import y`` (needed to import
the module at all) plus those it reaches through ``import x`` names, following calls to the
module's own functions. A package counts as present when `importlib` can find it.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from environments.tasks import official
from environments.tasks.official import _DISTRIBUTIONS, MissingScorer, metric_modules, scorer_tag

__all__ = [
    "Feature",
    "desktop_env_dir",
    "getter_types",
    "metric_option_keys",
    "metric_types",
    "missing_packages",
    "step_types",
]


@dataclass(frozen=True)
class Feature:
    """One step type, getter or metric of the official package."""

    name: str
    #: Source file (relative to the package) and function that implements it.
    module: str
    function: str
    #: Top-level Python packages the function needs.
    packages: frozenset[str]
    #: Why the package itself cannot run it (e.g. its body only raises NotImplementedError).
    refused: str | None = None


@functools.cache
def desktop_env_dir() -> Path:
    """The installed package's folder (the version check is `official`'s)."""
    return official.package_root()


def _source(relative: str) -> official.SourceFacts:
    return official.source_facts(desktop_env_dir() / relative)


def _packages(relative: str, function: str) -> frozenset[str]:
    source = _source(relative)
    used = set(source.from_imports)
    cls = function.split(".")[0] if "." in function else ""
    seen, todo = {function}, [function]
    while todo:
        node = source.functions.get(todo.pop())
        if node is None:
            continue
        for ref in ast.walk(node):
            name = ref.id if isinstance(ref, ast.Name) else None
            if cls and isinstance(ref, ast.Attribute) and isinstance(ref.value, ast.Name) and ref.value.id == "self":
                name = f"{cls}.{ref.attr}"  # a call to another method of the same class
            if name is None:
                continue
            if name in source.plain_imports:
                used.add(source.plain_imports[name])
            elif name in source.functions and name not in seen:
                seen.add(name)
                todo.append(name)
    return frozenset(used)


def _only_raises_not_implemented(node: ast.FunctionDef) -> bool:
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    target = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(target, ast.Name) and target.id == "NotImplementedError"


@functools.cache
def step_types() -> dict[str, Feature]:
    """Every ``_<type>_setup`` method of OSWorld's `SetupController`, by step type."""
    relative = "controllers/setup.py"
    found: dict[str, Feature] = {}
    for key, node in _source(relative).functions.items():
        cls, _, method = key.partition(".")
        if cls != "SetupController" or not (method.startswith("_") and method.endswith("_setup")):
            continue
        name = method[1 : -len("_setup")]
        if not name or name.startswith("_"):
            continue
        refused = (
            f"OSWorld's SetupController ({scorer_tag()}) does not implement step {name!r} (it raises NotImplementedError)"
            if _only_raises_not_implemented(node)
            else None
        )
        found[name] = Feature(name, relative, key, _packages(relative, key), refused)
    return found


@functools.cache
def getter_types() -> dict[str, Feature]:
    """Every ``get_<type>`` function `desktop_env.evaluators.getters` exports, by getter type."""
    init = desktop_env_dir() / "evaluators" / "getters" / "__init__.py"
    tree = ast.parse(init.read_text(encoding="utf-8"), str(init))
    found: dict[str, Feature] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            relative = f"evaluators/getters/{node.module}.py"
            for alias in node.names:
                exported = alias.asname or alias.name
                if exported.startswith("get_"):
                    found[exported[4:]] = Feature(exported[4:], relative, alias.name, _packages(relative, alias.name))
    return found


@functools.cache
def metric_types() -> dict[str, Feature]:
    """Every metric function the official package exports (not those decided by the last action)."""
    found: dict[str, Feature] = {}
    for name, module in metric_modules().items():
        if module == "__init__":
            continue
        relative = f"evaluators/metrics/{module}.py"
        found[name] = Feature(name, relative, name, _packages(relative, name))
    return found


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # ValueError: a stand-in module without a spec (`official`'s)
        return False


def missing_packages(feature: Feature) -> list[str]:
    """The PyPI names (`official`'s map of import names to distributions) of the packages `feature` needs that are not installed here, sorted."""
    return sorted(_DISTRIBUTIONS.get(p, p) for p in feature.packages if not _installed(p))


@dataclass(frozen=True)
class OptionKeys:
    """What option keys a metric takes: OSWorld calls ``metric(result, expected, **options)``."""

    #: Keys it takes as parameters or reads from its ``**options``; None: cannot tell (any may be read).
    read: frozenset[str] | None
    #: Whether it has ``**options`` at all: without it an unknown key raises TypeError in OSWorld
    #: too; with it an unread key is silently ignored, and the task is scored as OSWorld scores it.
    takes_any: bool


@functools.cache
def metric_option_keys(name: str) -> OptionKeys:
    """The option keys metric `name` takes (see `OptionKeys`)."""
    feature = metric_types().get(name)
    if feature is None:
        return OptionKeys(frozenset(), False)
    node = _source(feature.module).functions.get(feature.function)
    if node is None:
        raise MissingScorer(f"{scorer_tag()}: metric {name} is exported but {feature.module} has no such function")
    named = {a.arg for a in node.args.args[1:] + node.args.kwonlyargs}
    rest = node.args.kwarg.arg if node.args.kwarg else None
    if rest is None:
        return OptionKeys(frozenset(named), False)
    return OptionKeys(_read_keys(node, rest, named), True)


def _read_keys(node: ast.FunctionDef, rest: str, named: set[str]) -> frozenset[str] | None:
    keys: set[str] = set()
    for ref in ast.walk(node):
        if isinstance(ref, ast.Call):
            if any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == rest for k in ref.keywords):
                return None  # **options handed on to another function
            target = ref.func
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == rest
                and target.attr in ("get", "pop", "setdefault")
            ):
                if ref.args and isinstance(ref.args[0], ast.Constant) and isinstance(ref.args[0].value, str):
                    keys.add(ref.args[0].value)
                else:
                    return None
            elif any(isinstance(a, ast.Name) and a.id == rest for a in ref.args):
                return None  # the whole dict passed on
        elif isinstance(ref, ast.Subscript) and isinstance(ref.value, ast.Name) and ref.value.id == rest:
            if isinstance(ref.slice, ast.Constant) and isinstance(ref.slice.value, str):
                keys.add(ref.slice.value)
            else:
                return None
        elif isinstance(ref, ast.Compare) and any(
            isinstance(c, ast.Name) and c.id == rest for c in ref.comparators
        ):
            if isinstance(ref.left, ast.Constant) and isinstance(ref.left.value, str):
                keys.add(ref.left.value)
            else:
                return None
    return frozenset(named | keys)
