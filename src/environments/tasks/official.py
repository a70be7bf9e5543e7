"""OSWorld's own metrics, getters and controllers, from the pinned `desktop-env` package, one module at a time.

A submitted OSWorld score is only meaningful when each task is set up and scored by OSWorld's
own code, so the project has no metric, getter or setup-step implementations of its own:
`metric(name)` returns the function from `desktop_env.evaluators.metrics`, `getter(type)` the
``get_<type>`` of `desktop_env.evaluators.getters`, and `setup_controller_class()` its
`SetupController`.

Why one module at a time: the package's ``metrics/__init__.py`` (and ``getters/__init__.py``) imports every module,
and so torch (through easyocr), librosa and the rest, although each metric needs only its
own module's imports. This loader registers the metrics package without running that
``__init__`` and imports only the module that defines the wanted function; which module
that is comes from parsing the official ``__init__`` itself. A metric whose code needs a Python package that is not installed
fails with one line naming what to install. A package a module imports at its top but that
the wanted metric's own code (and the module functions it calls) never uses, such as easyocr
in the module that also holds `compare_docx_files`, is stood in for by a module that fails
loudly on first use, so torch is not needed to compare two documents.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import logging
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "OFFICIAL_PACKAGE",
    "OFFICIAL_VERSION",
    "MissingScorer",
    "OfficialMetric",
    "SourceFacts",
    "getter",
    "getter_modules",
    "getter_unsupported_reason",
    "metric",
    "metric_modules",
    "package_root",
    "python_controller_class",
    "reads_attribute",
    "register_metrics_package",
    "scorer_tag",
    "setup_controller_class",
    "source_facts",
    "unsupported_reason",
]

OFFICIAL_PACKAGE = "desktop-env"
#: The version every score is computed with; another installed version is refused.
OFFICIAL_VERSION = "1.0.2"
_METRICS = "desktop_env.evaluators.metrics"
_GETTERS = "desktop_env.evaluators.getters"
#: Import names whose PyPI distribution is named differently.
_DISTRIBUTIONS = {
    "docx": "python-docx",
    "pptx": "python-pptx",
    "fitz": "pymupdf",
    "cv2": "opencv-python-headless",
    "skimage": "scikit-image",
    "odf": "odfpy",
    "acoustid": "pyacoustid",
    "yaml": "PyYAML",
    "dotenv": "python-dotenv",
    "pydrive": "PyDrive",
    "PIL": "Pillow",
    "bs4": "beautifulsoup4",
    "sklearn": "scikit-learn",
}
_INSTALL_HINT = "pip install 'agent-s3[osworld]'"
_SETUP_HINT = "pip install 'agent-s3[osworld-setup]'"


class MissingScorer(RuntimeError):
    """The official scorer (or a package one of its metrics imports) is not installed here."""


@dataclass(frozen=True)
class OfficialMetric:
    name: str
    module: str
    fn: Callable[..., Any]


def scorer_tag() -> str:
    """What scores are tagged with, e.g. ``desktop-env 1.0.2``."""
    return f"{OFFICIAL_PACKAGE} {OFFICIAL_VERSION}"


@functools.cache
def package_root() -> Path:
    """The installed ``desktop_env`` folder, after checking it is the pinned version."""
    try:
        installed = importlib.metadata.version(OFFICIAL_PACKAGE)
    except importlib.metadata.PackageNotFoundError as exc:
        raise MissingScorer(
            f"OSWorld's scorer is not installed: {_INSTALL_HINT} (or pip install --no-deps "
            f"{OFFICIAL_PACKAGE}=={OFFICIAL_VERSION})"
        ) from exc
    if installed != OFFICIAL_VERSION:
        raise MissingScorer(
            f"{OFFICIAL_PACKAGE} {installed} is installed but scores use {OFFICIAL_VERSION}: "
            f"pip install --no-deps {OFFICIAL_PACKAGE}=={OFFICIAL_VERSION}"
        )
    spec = importlib.util.find_spec("desktop_env")
    if spec is None or not spec.submodule_search_locations:
        raise MissingScorer(f"{OFFICIAL_PACKAGE} is installed but desktop_env cannot be found: reinstall it")
    return Path(next(iter(spec.submodule_search_locations)))


def _package_dir(package: str) -> Path:
    return package_root().joinpath(*package.split(".")[1:])


@functools.cache
def _exports(package: str) -> dict[str, str]:
    """Every name `package`'s ``__init__`` exports → the module defining it (``__init__`` for its own)."""
    init = _package_dir(package) / "__init__.py"
    tree = ast.parse(init.read_text(encoding="utf-8"), str(init))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = node.module
        elif isinstance(node, ast.FunctionDef):
            found[node.name] = "__init__"
    return found


def metric_modules() -> dict[str, str]:
    """Every metric name the official package exports → the module defining it (from its ``__init__``)."""
    return _exports(_METRICS)


def getter_modules() -> dict[str, str]:
    """Every getter type (``vm_file`` for ``get_vm_file``) → the module defining its function."""
    return {name.removeprefix("get_"): module for name, module in _exports(_GETTERS).items()}


@dataclass(frozen=True)
class SourceFacts:
    """What a file of the official package says: its imports and its functions (a class's
    methods as ``Class.name``), with the names and attributes each function reads."""

    plain_imports: dict[str, str]  # local name → top-level package, for `import x [as y]`
    from_imports: frozenset[str]  # top-level packages imported with `from x import y`
    functions: dict[str, ast.FunctionDef]
    references: dict[str, frozenset[str]]  # function → names it references
    attributes: dict[str, frozenset[str]]  # function → attribute names it reads


@functools.cache
def source_facts(path: Path) -> SourceFacts:
    """Parse one source file of the package (never imported: reading it costs no dependency)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    plain: dict[str, str] = {}
    froms: set[str] = set()
    functions: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                plain[alias.asname or top] = top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.split(".")[0]
            if top != "desktop_env":
                froms.add(top)
        elif isinstance(node, ast.FunctionDef):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    functions[f"{node.name}.{item.name}"] = item
    references = {k: frozenset(n.id for n in ast.walk(f) if isinstance(n, ast.Name)) for k, f in functions.items()}
    attributes = {k: frozenset(n.attr for n in ast.walk(f) if isinstance(n, ast.Attribute)) for k, f in functions.items()}
    return SourceFacts(plain, frozenset(froms), functions, references, attributes)


def _module_source(package: str, module: str) -> SourceFacts:
    return source_facts(_package_dir(package) / f"{module}.py")


def _reachable(package: str, module: str, name: str) -> set[str]:
    """`name` and the functions of its module it calls, transitively."""
    source = _module_source(package, module)
    seen, todo = {name}, [name]
    while todo:
        for ref in source.references.get(todo.pop(), frozenset()):
            if ref in source.references and ref not in seen:
                seen.add(ref)
                todo.append(ref)
    return seen


def _used_packages(package: str, module: str, name: str) -> set[str]:
    """Top-level packages `name` uses through `import x` names, following calls within its module."""
    source = _module_source(package, module)
    used: set[str] = set()
    for fn in _reachable(package, module, name):
        used |= {
            source.plain_imports[r]
            for r in source.references.get(fn, frozenset())
            if r in source.plain_imports
        }
    return used


def reads_attribute(getter_type: str, attribute: str) -> bool:
    """Whether OSWorld's getter (or a function of its module it calls) reads ``<x>.attribute``."""
    module = getter_modules()[getter_type]
    source = _module_source(_GETTERS, module)
    name = f"get_{getter_type}"
    return any(
        attribute in source.attributes.get(fn, frozenset()) for fn in _reachable(_GETTERS, module, name)
    )


def _installed(package: str) -> bool:
    loaded = sys.modules.get(package)
    if loaded is not None:
        return not isinstance(loaded, _Absent)
    return importlib.util.find_spec(package) is not None


class _Absent(types.ModuleType):
    """Stands in for a package a module imports but the wanted function never uses."""

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        package = _DISTRIBUTIONS.get(self.__name__, self.__name__)
        raise MissingScorer(
            f"this OSWorld function needs the Python package {package}: pip install {package}"
        )


def _missing_message(kind: str, name: str, module: str, package: str) -> str:
    package = _DISTRIBUTIONS.get(package, package)
    return (
        f"OSWorld's {kind} {name} (module {module} of {scorer_tag()}) needs the Python package "
        f"{package}: pip install {package}"
    )


def _register(package: str) -> None:
    """Make `package` importable without executing its eager ``__init__``."""
    if package in sys.modules:
        return
    importlib.import_module(package.rpartition(".")[0])
    folder = _package_dir(package)
    spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
    spec.submodule_search_locations = [str(folder)]
    module = types.ModuleType(package)
    module.__spec__ = spec
    module.__path__ = [str(folder)]
    module.__file__ = str(folder / "__init__.py")
    sys.modules[package] = module


@functools.cache
def _offline_suffix_list() -> None:
    """tldextract (OSWorld's URL helpers use it) fetches the public suffix list on first use;
    this runner has no network, so it reads the list bundled with the package instead."""
    if importlib.util.find_spec("tldextract") is None:
        return
    import tldextract.tldextract as extractor

    extractor.TLD_EXTRACTOR = extractor.TLDExtract(suffix_list_urls=())


def register_metrics_package() -> None:
    """Make the metrics package importable without executing its eager ``__init__``.

    Also what lets OSWorld's own `SetupController` (which imports one helper from the
    metrics package) be imported without torch.
    """
    _offline_suffix_list()
    _register(_METRICS)


def _load(kind: str, package: str, module: str, name: str) -> OfficialMetric:
    _register(package)
    source = _module_source(package, module)
    for needed in sorted(_used_packages(package, module, name) | source.from_imports):
        if not _installed(needed):
            raise MissingScorer(_missing_message(kind, name, module, needed))
    for needed in sorted(set(source.plain_imports.values())):
        if not _installed(needed):
            sys.modules[needed] = _Absent(needed)
    try:
        loaded = importlib.import_module(f"{package}.{module}")
    except ModuleNotFoundError as exc:
        raise MissingScorer(
            _missing_message(kind, name, module, (exc.name or str(exc)).split(".")[0])
        ) from exc
    return OfficialMetric(name, module, getattr(loaded, name))


@functools.cache
def metric(name: str) -> OfficialMetric:
    """OSWorld's function for metric `name`; `MissingScorer` says what to install, `KeyError` if none."""
    modules = metric_modules()
    if name not in modules:
        raise KeyError(f"OSWorld ({scorer_tag()}) has no metric {name!r}")
    module = modules[name]
    if module == "__init__":
        raise KeyError(f"{name!r} is not a function of files; the evaluator decides it from the last action")
    register_metrics_package()
    return _load("metric", _METRICS, module, name)


@functools.cache
def getter(getter_type: str) -> OfficialMetric:
    """OSWorld's ``get_<getter_type>``; `MissingScorer` says what to install, `KeyError` if none."""
    modules = getter_modules()
    if getter_type not in modules:
        raise KeyError(f"OSWorld ({scorer_tag()}) has no getter type {getter_type!r}")
    register_metrics_package()  # some getter modules import metric helpers
    return _load("getter", _GETTERS, modules[getter_type], f"get_{getter_type}")


def _refusal(load: Callable[[str], object], name: str) -> str | None:
    """Why `load(name)` fails here (the package has no such function, a package to install), or None."""
    try:
        load(name)
    except KeyError as exc:
        return str(exc.args[0]) if exc.args else f"OSWorld ({scorer_tag()}) has no {name!r}"
    except MissingScorer as exc:
        return str(exc)
    return None


def getter_unsupported_reason(getter_type: str) -> str | None:
    """Why getter `getter_type` cannot run here (no such official getter, a package to install), or None."""
    return _refusal(getter, getter_type)


@functools.cache
def setup_controller_class() -> type[Any]:
    """OSWorld's own ``SetupController`` (its module needs the ``[osworld-setup]`` extra)."""
    package_root()
    register_metrics_package()  # the controller imports one helper of the metrics package
    # Its chrome steps log the whole process environment at DEBUG ("PLAYWRIGHT ENV"): keep
    # its logger at INFO or above so no secret of this process reaches a log.
    setup_log = logging.getLogger("desktopenv.setup")
    if setup_log.getEffectiveLevel() < logging.INFO:
        setup_log.setLevel(logging.INFO)
    # Its module loads OSWorld's paid proxy pool from a file under the current folder at import
    # and logs an ERROR when (as here) there is none; the `proxy` step that uses it is refused.
    pool_log = logging.getLogger("desktopenv.providers.aws.ProxyPool")
    pool_log.disabled = True
    try:
        from desktop_env.controllers.setup import SetupController
    except ModuleNotFoundError as exc:
        package = _DISTRIBUTIONS.get((exc.name or "").split(".")[0], exc.name or str(exc))
        raise MissingScorer(
            f"OSWorld's setup controller ({scorer_tag()}) needs the Python package {package}: {_SETUP_HINT}"
        ) from exc
    finally:
        pool_log.disabled = False
    return SetupController  # type: ignore[no-any-return]


@functools.cache
def python_controller_class() -> type[Any]:
    """OSWorld's own host-side ``PythonController``, which the getters call through ``env.controller``."""
    package_root()
    from desktop_env.controllers.python import PythonController

    return PythonController  # type: ignore[no-any-return]


def unsupported_reason(name: str) -> str | None:
    """Why metric `name` cannot score here (no such official metric, a package to install), or None."""
    return _refusal(metric, name)
