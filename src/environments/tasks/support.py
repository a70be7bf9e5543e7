"""Which tasks of a set can run, against OSWorld's own package and what a machine offers.

What is supported is read from the pinned official package (`official_surface`): its setup
controller's step types, its getters and its metrics, with the Python packages each needs on
the host that drives them, and each metric's option keys. What a machine offers is what its
desktops offer a task (`needs`: programs on their PATH, an app registered to open a file
type, modules their ``python`` imports; asked inside a local desktop by
``environments.local.probe``, or of this host with ``installed_here``) and network access. Every refusal of a
task is listed, not only the first per metric: a `Refusal` names its kind, what is refused,
why, and whether it blocks the task everywhere (the package lacks it, or this host lacks a
Python package or credentials) or only on this machine (an app, the network); OSWorld's VM
image ships the apps and has network, so only the first kind blocks a task there.

A task is `runnable` (on OSWorld's VM image) when nothing blocks it everywhere, `local`
when nothing blocks it here either. Tasks scored by a metric are counted apart from
`infeasible` ones (scored from the agent's last action, no files).
"""

from __future__ import annotations

import functools
import mimetypes
import re
import shlex
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from core.shell_flag import osworld_shell
from core.trajectory import Task
from environments.server.app_names import program_available
from environments.tasks import official_surface as surface
from environments.tasks.differences import DIFFERENCES, task_differences
from environments.tasks.network import needs_network, network_reason
from environments.tasks.official import OFFICIAL_PACKAGE, MissingScorer, scorer_tag

__all__ = [
    "HOST_FACTS",
    "SYSTEMD_TOOLS",
    "Refusal",
    "SupportReport",
    "ignored_options",
    "installed_here",
    "needs",
    "openers",
    "programs",
    "python_modules",
    "support_report",
    "task_gaps",
    "task_refusals",
]


def _remote(url: str) -> bool:
    return urlparse(url).scheme in ("http", "https", "ftp")


Scope = Literal["everywhere", "here"]


@dataclass(frozen=True)
class Refusal:
    """One thing that keeps a task from running: ``kind:name``, why, and where it blocks."""

    kind: str  # step, getter, metric, option, package, credentials, program, opener, network
    name: str
    reason: str
    #: "everywhere": the official package or this host lacks it (OSWorld's VM image too);
    #: "here": only this machine lacks it (an app, the network).
    scope: Scope

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"


def _feature_refusals(kind: str, name: str, features: dict[str, surface.Feature]) -> list[Refusal]:
    feature = features.get(name)
    label = {"step": "setup step type", "getter": "getter type", "metric": "metric"}[kind]
    if feature is None:
        return [Refusal(kind, name, f"OSWorld's package ({scorer_tag()}) has no {label} {name!r}", "everywhere")]
    if feature.refused is not None:
        return [Refusal(kind, name, feature.refused, "everywhere")]
    return [
        Refusal("package", f"{package} ({kind} {name})",
                f"{label} {name} ({feature.module}) needs the Python package {package}: pip install {package}",
                "everywhere")
        for package in surface.missing_packages(feature)
    ]


def _settings_files(task: Task) -> set[str]:
    """Credential files (Google Drive, logins) that steps and getters name."""
    found = set()
    for step in task.all_steps():
        if step.type in ("googledrive", "login") or "settings_file" in step.parameters:
            found.add(str(step.parameters.get("settings_file", "")))
    for call in task.metric_calls():
        for spec in (call.result, call.expected):
            if spec is not None and "settings_file" in spec.params:
                found.add(str(spec.params["settings_file"]))
    return found


def _settings_present(name: str, task: Task) -> bool:
    """OSWorld reads these relative to its checkout: look there (any folder above the task) and here."""
    if not name:
        return False
    path = Path(name)
    places = [Path.cwd()] + (list(Path(task.source_path).parents) if task.source_path else [])
    return path.is_file() if path.is_absolute() else any((p / path).is_file() for p in places)


def _official_refusals(task: Task) -> list[Refusal]:
    """What OSWorld's package (or a Python package its code needs on this host) refuses of `task`."""
    out: list[Refusal] = []
    for step in task.all_steps():
        out += _feature_refusals("step", step.type, surface.step_types())
    for call in task.metric_calls():
        if call.func != "infeasible":
            out += _feature_refusals("metric", call.func, surface.metric_types())
            if call.func in surface.metric_types():
                keys = surface.metric_option_keys(call.func)
                for key in sorted(call.options):
                    if not keys.takes_any and keys.read is not None and key not in keys.read:
                        out.append(Refusal("option", f"{call.func}.{key}",
                                           f"OSWorld's {call.func} ({scorer_tag()}) takes no option {key!r} "
                                           "(it would raise TypeError)", "everywhere"))
        for spec in (call.result, call.expected):
            if spec is not None:
                out += _feature_refusals("getter", spec.type, surface.getter_types())
    return out


#: The operating system of this machine's desktops (local desktops are Linux: OSWorld's "Ubuntu").
HERE_PLATFORM = "ubuntu"


def task_refusals(
    task: Task, *, installed: Callable[[str], bool] | None = None, network: bool = True,
    platform: str = HERE_PLATFORM,
) -> list[Refusal]:
    """Everything that keeps `task` from running, each once. `installed` says which programs
    exist here (default: look on this machine); `network` whether it can download; `platform`
    is the task set's operating system (OSWorld's ``examples_windows`` are ``windows``)."""
    installed = installed or installed_here
    out: list[Refusal] = []
    if platform != HERE_PLATFORM:
        out.append(Refusal("platform", platform, f"a {platform} task; this machine's desktops run Linux", "here"))
    try:
        out += _official_refusals(task)
    except MissingScorer as exc:  # without the package nothing can be set up or scored
        out.append(Refusal("scorer", OFFICIAL_PACKAGE, str(exc), "everywhere"))
    for name in sorted(_settings_files(task)):
        if not _settings_present(name, task):
            out.append(Refusal("credentials", name or "(none named)",
                               f"needs the account settings file {name!r} (Google Drive or a login), not found",
                               "everywhere"))
    for need in sorted(needs(task)):
        if not installed(need):
            kind, _, what = need.partition(":") if ":" in need else ("program", "", need)
            reason = {
                "opener": f"no app here opens {what} files",
                "module": f"the desktop's python cannot import {what}",
            }.get(kind, f"the program {need} is not installed here" if need not in SYSTEMD_TOOLS
                  else f"{need} needs a running systemd, which desktops do not run")
            out.append(Refusal(kind, what, reason, "here"))
    if not network and _needs_network(task):
        out.append(Refusal("network", "download", "downloads files from the internet; this machine has no network",
                           "here"))
    web = network_reason(task)
    if not network and web is not None:
        out.append(Refusal("network", "web", f"needs the internet ({web}); this machine has no network", "here"))
    unique: dict[str, Refusal] = {}
    for refusal in out:
        unique.setdefault(refusal.key, refusal)
    return list(unique.values())


def ignored_options(task: Task) -> list[str]:
    """``metric.key`` for each option a task gives that OSWorld's metric never reads: OSWorld
    scores the task all the same (its ``**options`` swallows it), so this is no refusal."""
    found: list[str] = []
    try:
        surface.metric_types()
    except MissingScorer:
        return found
    for call in task.metric_calls():
        if call.func in surface.metric_types():
            keys = surface.metric_option_keys(call.func)
            if keys.takes_any and keys.read is not None:
                found += [f"{call.func}.{k}" for k in sorted(call.options) if k not in keys.read]
    return list(dict.fromkeys(found))


def task_gaps(task: Task) -> list[str]:
    """What keeps `task` from running anywhere (OSWorld's package, this host's Python packages),
    e.g. ``["step:googledrive", "option:compare_table.bogus"]``; apps and network are not gaps."""
    return [r.key for r in task_refusals(task, installed=lambda _: True) if r.scope == "everywhere"]


#: Steps whose `command` starts a program on the desktop.
_PROGRAM_STEPS = ("launch", "execute", "command", "execute_with_verification")
#: Getters that run a command on the desktop.
_PROGRAM_GETTERS = ("vm_command_line", "vm_command_error")
#: Shell words that are no program (builtins, keywords).
_SHELL_WORDS = frozenset({
    "cd", "export", "echo", "source", ".", "exec", "set", "true", "false", "if", "then", "else", "elif", "fi",
    "for", "while", "until", "do", "done", "case", "esac", "in", "[", "[[", "]", "]]", "test", "local", "read",
    "printf", "exit", "return", "eval", "unset", "shift", "break", "continue", "wait", "!", "{", "}", "(", ")",
    "function", "declare", "let", "trap", "type", "command", "alias", "umask", "sleep",
})  # fmt: skip
#: Words that run the command after them (their own options skipped).
_WRAPPERS = {"sudo": 1, "timeout": 2, "nohup": 1, "env": 1, "nice": 1, "xargs": 1}
_SEGMENTS = re.compile(r"&&|\|\||[;|&\n]|\$\(|`|\bthen\b|\bdo\b|\belse\b")


def _segment_programs(words: list[str]) -> set[str]:
    """The programs a shell segment runs: sudo, timeout or env, and the command after them."""
    found: set[str] = set()
    while words:
        if "=" in words[0] and not words[0].startswith(("=", "-")):
            words = words[1:]
            continue
        wrapper = _WRAPPERS.get(words[0])
        if wrapper is None:
            break
        found.add(words[0])
        words = words[1:]
        while words and (words[0].startswith("-") or (wrapper == 2 and words[0].replace(".", "").isdigit())):
            words = words[1:]
    if not words or words[0] in _SHELL_WORDS:
        return found
    name = words[0].rsplit("/", 1)[-1]
    if words[0].startswith(("./", "~", "$")) or not name:
        return found  # a script by path or a variable: nothing to look for on PATH
    return found | ({name} if name.replace("-", "").replace("_", "").replace(".", "").isalnum() else set())


def _command_programs(raw: object, shell: bool) -> set[str]:
    """Programs a step's or getter's command runs: a list's first word; with a shell, the
    first word of every segment (pipes, lists, subshells, ``then``/``do`` bodies)."""
    if isinstance(raw, list):
        words = [w for w in raw if isinstance(w, str)]
        if not shell:
            return _segment_programs(words)
        raw = " ".join(words)
    if not isinstance(raw, str):
        return set()
    segments = _SEGMENTS.split(raw) if shell else [raw]
    found = set()
    for segment in segments:
        try:
            words = shlex.split(segment, comments=True)
        except ValueError:
            words = segment.split()
        found |= _segment_programs(words)
    return found


def programs(task: Task) -> set[str]:
    """Programs the task's steps and command getters run on the desktop (shell builtins,
    keywords and scripts by path left out)."""
    found: set[str] = set()
    for step in task.all_steps():
        if step.type in _PROGRAM_STEPS:
            found |= _command_programs(step.parameters.get("command"), osworld_shell(step.parameters.get("shell")))
    for call in task.metric_calls():
        for spec in (call.result, call.expected):
            if spec is not None and spec.type in _PROGRAM_GETTERS:
                found |= _command_programs(spec.params.get("command"), osworld_shell(spec.params.get("shell")))
    return found


def openers(task: Task) -> set[str]:
    """``opener:<mime type>`` for each file an `open` step hands to the desktop's default app."""
    found = set()
    for step in task.all_steps():
        if step.type == "open":
            mime, _ = mimetypes.guess_type(str(step.parameters.get("path", "")))
            if mime:
                found.add(f"opener:{mime}")
    return found


_PYTHONS = frozenset({"python", "python3"})
_IMPORT = re.compile(r"^\s*(?:import\s+([\w.]+(?:\s*,\s*[\w.]+)*)|from\s+([\w.]+)\s+import)", re.MULTILINE)


def _python_code(command: object) -> list[str]:
    """The code of each ``python -c CODE`` in a command (a list, or a shell string)."""
    if isinstance(command, str):
        try:
            words = shlex.split(command)
        except ValueError:
            return []
    elif isinstance(command, list):
        words = [w for w in command if isinstance(w, str)]
    else:
        return []
    return [words[i + 2] for i, w in enumerate(words[:-2]) if w.rsplit("/", 1)[-1] in _PYTHONS and words[i + 1] == "-c"]


def _imports(code: str) -> set[str]:
    found: set[str] = set()
    for match in _IMPORT.finditer(code.replace(";", "\n")):
        names = match.group(1) or match.group(2) or ""
        found |= {n.strip().split(".")[0] for n in names.split(",") if n.strip()}
    return found


def python_modules(task: Task) -> set[str]:
    """``module:<name>`` for each module the desktop's ``python`` must import for the task: in
    its steps' and getters' ``python -c`` commands, and pyautogui for OSWorld's getters that
    run ``python -c`` through its controller (``execute_python_command``, ``vm_platform``)."""
    found: set[str] = set()
    commands = [s.parameters.get("command") for s in task.all_steps()]
    specs = [spec for call in task.metric_calls() for spec in (call.result, call.expected) if spec is not None]
    commands += [spec.params.get("command") for spec in specs]
    for command in commands:
        for code in _python_code(command):
            found |= _imports(code)
    try:
        getters = surface.getter_types()
    except MissingScorer:
        getters = {}
    if any(spec.type in getters and _runs_python(spec.type) for spec in specs):
        found.add("pyautogui")
    return {f"module:{m}" for m in found if m.isidentifier()}


@functools.cache
def _runs_python(getter_type: str) -> bool:
    from environments.tasks.official import reads_attribute

    return any(reads_attribute(getter_type, a) for a in ("execute_python_command", "vm_platform"))


def needs(task: Task) -> set[str]:
    """What the task asks of the desktop it runs on: programs, openers and Python modules."""
    return programs(task) | openers(task) | python_modules(task)


@functools.cache
def installed_here(need: str) -> bool:
    """This host's answer (not a desktop's): a program on PATH, (``opener:<mime type>``) an
    application registered to open it, or (``module:<name>``) a module of /usr/bin/python3."""
    if need.startswith("module:"):
        probe = ["/usr/bin/python3", "-c", f"import importlib.util; exit(importlib.util.find_spec({need[7:]!r}) is None)"]
        return subprocess.run(probe, capture_output=True, check=False, timeout=30).returncode == 0
    if not need.startswith("opener:"):
        return program_available(need)
    if shutil.which("xdg-mime") is None:
        return False
    try:
        reply = subprocess.run(
            ["xdg-mime", "query", "default", need.removeprefix("opener:")],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return bool(reply.stdout.strip())


def _needs_network(task: Task) -> bool:
    for step in task.all_steps():
        if step.type == "download" and any(
            _remote(str(f.get("url", ""))) for f in step.parameters.get("files", [])
        ):
            return True
    for call in task.metric_calls():
        for spec in (call.result, call.expected):
            if spec is not None and spec.type == "cloud_file":
                paths = spec.params.get("path")
                if any(_remote(str(p)) for p in (paths if isinstance(paths, list) else [paths])):
                    return True
    return False


@dataclass
class _Domain:
    tasks: int = 0
    #: On OSWorld's VM image: runnable tasks scored by a metric, and `infeasible` ones.
    vm_metric: int = 0
    vm_infeasible: int = 0
    #: On this machine (its apps, its network).
    here_metric: int = 0
    here_infeasible: int = 0


_DIFFERENCE_TEXT = {d.key: d.what for d in DIFFERENCES}
#: systemd's tools: installed with it, working only where it runs (never inside a desktop).
SYSTEMD_TOOLS = frozenset({"timedatectl", "systemctl", "hostnamectl", "localectl", "loginctl", "busctl", "journalctl"})
#: A refusal whose reason differs per task, summed up in one line.
_SUMMARY_REASONS = {
    "network:web": "needs the internet to be set up or solved (a browser task, a remote URL, a fetch inside "
    "the desktop, an install); this machine has no network",
}
#: What `installed_here` answers for.
HOST_FACTS = "this host (its PATH, /usr/bin/python3 and xdg-mime)"


@dataclass
class SupportReport:
    """Counts over a task set, every refusal per task, and coverage by domain."""

    #: Whether this machine was taken to have network access.
    network: bool = True
    #: Whose programs, modules and default apps "here" means.
    answered_for: str = HOST_FACTS
    tasks: int = 0
    #: Runnable on OSWorld's VM image: nothing blocks the task everywhere.
    runnable: int = 0
    #: Runnable tasks that need no download from the internet.
    offline: int = 0
    #: Runnable tasks whose only metric is `infeasible` (scored from the last action, not files).
    infeasible: int = 0
    #: Runnable on this machine too (its programs, apps and network).
    local: int = 0
    local_infeasible: int = 0
    domains: dict[str, _Domain] = field(default_factory=dict)
    #: Every refusal of every task that has one, by task id.
    refusals: dict[str, list[Refusal]] = field(default_factory=dict)
    #: Tasks refused everywhere by each ``kind:name`` (every refusal of a task counts, not only the first).
    refused: Counter[str] = field(default_factory=Counter)
    #: Tasks runnable on OSWorld's VM image kept from running here by each program or app.
    missing_programs: Counter[str] = field(default_factory=Counter)
    steps: Counter[str] = field(default_factory=Counter)
    getters: Counter[str] = field(default_factory=Counter)
    metrics: Counter[str] = field(default_factory=Counter)
    #: Tasks using each ``step:``/``getter:``/``metric:`` name that refuse it.
    unsupported: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, str] = field(default_factory=dict)
    #: Tasks giving each ``metric.option`` that OSWorld's metric never reads (scored all the same).
    ignored: Counter[str] = field(default_factory=Counter)
    #: Tasks runnable here that meet each known difference from OSWorld's image (`differences`).
    differences: Counter[str] = field(default_factory=Counter)
    #: The known differences each task runnable here meets, by task id.
    differences_by_task: dict[str, list[str]] = field(default_factory=dict)

    def supported_names(self, kind: str) -> list[str]:
        """Names of `kind` ("step", "getter", "metric") that at least one task can use."""
        counter = {"step": self.steps, "getter": self.getters, "metric": self.metrics}[kind]
        return sorted(n for n, c in counter.items() if self.unsupported[f"{kind}:{n}"] < c)

    def unsupported_names(self, kind: str) -> list[str]:
        """Names of `kind` that some task uses in a way OSWorld's package or this host cannot run."""
        return sorted(k.split(":", 1)[1] for k in self.unsupported if k.startswith(f"{kind}:"))

    def format(self, *, per_task: bool = False) -> str:
        """A plain-text table for people."""
        try:
            official = (f"{len(surface.step_types())} step types, {len(surface.getter_types())} getters, "
                        f"{len(surface.metric_types())} metrics")
        except MissingScorer as exc:
            official = f"not installed: {exc}"
        lines = [
            f"scorer: {scorer_tag()} (OSWorld's own setup controller, getters and metric functions: {official})",
            f"here means: {self.answered_for}, {'with' if self.network else 'without'} network",
            f"tasks {self.tasks}: runnable here {self.local} ({self.local - self.local_infeasible} scored by a "
            f"metric, {self.local_infeasible} infeasible){'' if self.network else ' without network'}",
            f"on OSWorld's VM image: {self.runnable} ({self.runnable - self.infeasible} scored by a metric, "
            f"{self.infeasible} infeasible), of which need no network {self.offline}",
            "coverage by domain: tasks | on OSWorld's VM image: metric, infeasible | this machine: metric, infeasible",
        ]
        for name, d in sorted(self.domains.items()):
            lines.append(f"  {name:<28} {d.tasks:>4} | {d.vm_metric:>4} {d.vm_infeasible:>4} | "
                         f"{d.here_metric:>4} {d.here_infeasible:>4}")
        if self.missing_programs:
            lines.append("blocked here only (apps, network): tasks runnable on OSWorld's VM image that need each")
            for name, count in self.missing_programs.most_common():
                lines.append(f"  {name:<48} {count:>4}  {self.reasons[name]}")
        if self.refused:
            lines.append("refused everywhere (tasks blocked by each; a task counts under every refusal it has)")
            for key, count in self.refused.most_common():
                lines.append(f"  {key:<48} {count:>4}  {self.reasons[key]}")
        if self.differences:
            lines.append("may score differently here: tasks runnable here that meet each known difference from "
                         "OSWorld's image (a warning, not a refusal)")
            for key, count in self.differences.most_common():
                lines.append(f"  {key:<20} {count:>4}  {_DIFFERENCE_TEXT[key]}")
        if self.ignored:
            lines.append("options OSWorld's metric never reads (no refusal: OSWorld scores these tasks the same way)")
            for key, count in self.ignored.most_common():
                lines.append(f"  {key:<48} {count:>4}")
        for kind, counter in (("step", self.steps), ("getter", self.getters), ("metric", self.metrics)):
            lines.append(f"{kind} types: tasks using each, of which refused")
            for name, count in counter.most_common():
                missing = self.unsupported[f"{kind}:{name}"]
                lines.append(f"  {name:<40} {count:>4} {missing or '':>4}")
        if per_task:
            lines.append("refusals per task")
            for task_id, refusals in sorted(self.refusals.items()):
                lines.append(f"  {task_id}: " + "; ".join(
                    f"{r.key} ({r.scope}: {r.reason})" if r.key == "network:web" else f"{r.key} ({r.scope})"
                    for r in refusals))
            lines.append("known differences per task runnable here")
            for task_id, keys in sorted(self.differences_by_task.items()):
                lines.append(f"  {task_id}: {', '.join(keys)}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """Everything in the report, for tools (``python -m environments.tasks --json``)."""
        return {
            "scorer": scorer_tag(),
            "network": self.network,
            "answered_for": self.answered_for,
            "tasks": self.tasks,
            "on_osworld_vm_image": {"runnable": self.runnable, "scored_by_metric": self.runnable - self.infeasible,
                                    "infeasible": self.infeasible, "offline": self.offline},
            "this_machine": {"runnable": self.local, "scored_by_metric": self.local - self.local_infeasible,
                             "infeasible": self.local_infeasible},
            "domains": {name: asdict(d) for name, d in sorted(self.domains.items())},
            "refused": dict(self.refused.most_common()),
            "reasons": dict(sorted(self.reasons.items())),
            "ignored_options": dict(self.ignored.most_common()),
            "differences": dict(self.differences.most_common()),
            "differences_by_task": dict(sorted(self.differences_by_task.items())),
            "refusals": {t: [asdict(r) for r in rs] for t, rs in sorted(self.refusals.items())},
            "usage": {"steps": dict(self.steps), "getters": dict(self.getters), "metrics": dict(self.metrics)},
        }


def support_report(
    tasks: Iterable[Task], *, installed: Callable[[str], bool] = installed_here, network: bool = True,
    platform: str = HERE_PLATFORM, answered_for: str = HOST_FACTS,
) -> SupportReport:
    """Count, over `tasks`, how many use each step type, getter and metric, every refusal of
    each task, which run on OSWorld's VM image and which on this machine (`installed` says
    which programs exist here, `network` whether it can download)."""
    report = SupportReport(network=network, answered_for=answered_for)
    for task in tasks:
        report.tasks += 1
        domain = report.domains.setdefault(task.domain or "(none)", _Domain())
        domain.tasks += 1
        report.steps.update({s.type for s in task.all_steps()})
        calls = task.metric_calls()
        report.metrics.update({c.func for c in calls})
        report.getters.update({s.type for c in calls for s in (c.result, c.expected) if s is not None})
        report.ignored.update(ignored_options(task))
        refusals = task_refusals(task, installed=installed, network=network, platform=platform)
        if refusals:
            report.refusals[task.id] = refusals
        for refusal in refusals:
            report.reasons.setdefault(refusal.key, _SUMMARY_REASONS.get(refusal.key, refusal.reason))
            if refusal.scope == "everywhere":
                report.refused[refusal.key] += 1
            if refusal.kind in ("step", "getter", "metric"):
                report.unsupported[refusal.key] += 1
        infeasible = [c.func for c in calls] == ["infeasible"]
        if any(r.scope == "everywhere" for r in refusals):
            continue
        report.runnable += 1
        report.infeasible += infeasible
        domain.vm_infeasible += infeasible
        domain.vm_metric += not infeasible
        if not _needs_network(task) and not needs_network(task):  # the host's downloads, the desktop's web
            report.offline += 1
        if refusals:
            report.missing_programs.update(r.key for r in refusals)
            continue
        report.local += 1
        report.local_infeasible += infeasible
        met = [d.key for d in task_differences(task)]
        if met and not infeasible:  # an infeasible task is scored from the answer alone
            report.differences.update(met)
            report.differences_by_task[task.id] = met
        domain.here_infeasible += infeasible
        domain.here_metric += not infeasible
    return report
