"""Which tasks of a set this runner can run: counts of setup types, getters and metrics.

Loading never fails for an unsupported feature; this report names them, and running such a
task raises the matching `Unsupported*` error. A task is `runnable` when every step, getter
and metric is supported, and `offline` when, in addition, it needs no remote download.
"""

from __future__ import annotations

import functools
import mimetypes
import shlex
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlparse

from environments.server.app_names import program_available
from environments.tasks.getters import getter_supported
from environments.tasks.model import OSWorldTask
from environments.tasks.network import needs_network
from environments.tasks.official import scorer_tag, unsupported_reason
from environments.tasks.steps import step_supported

__all__ = ["SupportReport", "installed_here", "openers", "programs", "support_report", "task_gaps"]


def _remote(url: str) -> bool:
    return urlparse(url).scheme in ("http", "https", "ftp")


def task_gaps(task: OSWorldTask) -> list[str]:
    """What keeps `task` from running here, e.g. ``["step:chrome_open_tabs", "metric:compare_pdfs"]``."""
    gaps = [f"step:{s.type}" for s in task.all_steps() if not step_supported(s.type)]
    for call in task.evaluator.calls():
        if call.func != "infeasible" and unsupported_reason(call.func) is not None:
            gaps.append(f"metric:{call.func}")
        for spec in (call.result, call.expected):
            if spec is not None and not getter_supported(spec.type):
                gaps.append(f"getter:{spec.type}")
    return list(dict.fromkeys(gaps))


#: Steps whose `command` starts a program on the desktop.
_PROGRAM_STEPS = ("launch", "execute", "command", "execute_with_verification")


_SHELL_WORDS = frozenset({"cd", "export", "echo", "source", ".", "exec", "set", "true", "false"})


def programs(task: OSWorldTask) -> set[str]:
    """Programs the task's steps start on the desktop: each command's first word after any
    ``NAME=value`` assignments (shell builtins and scripts by relative path left out)."""
    found = set()
    for step in task.all_steps():
        if step.type not in _PROGRAM_STEPS:
            continue
        raw = step.parameters.get("command")
        if isinstance(raw, str):
            try:
                command: list[object] = list(shlex.split(raw))
            except ValueError:
                command = list(raw.split())
        elif isinstance(raw, list):
            command = raw
        else:
            continue
        words = [w for w in command if isinstance(w, str)]
        while words and "=" in words[0] and not words[0].startswith("="):
            words.pop(0)
        if not words or words[0] in _SHELL_WORDS or (_truthy(step.parameters.get("shell")) and "/" in words[0]):
            continue
        name = words[0].rsplit("/", 1)[-1]
        if name and name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            found.add(name)
    return found


def openers(task: OSWorldTask) -> set[str]:
    """``opener:<mime type>`` for each file an `open` step hands to the desktop's default app."""
    found = set()
    for step in task.all_steps():
        if step.type == "open":
            mime, _ = mimetypes.guess_type(str(step.parameters.get("path", "")))
            if mime:
                found.add(f"opener:{mime}")
    return found


@functools.cache
def installed_here(need: str) -> bool:
    """A program on PATH, or (``opener:<mime type>``) an application registered to open it."""
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


def _truthy(value: object) -> bool:
    return value.strip().lower() == "true" if isinstance(value, str) else bool(value)


def _needs_network(task: OSWorldTask) -> bool:
    for step in task.all_steps():
        if step.type == "download" and any(
            _remote(str(f.get("url", ""))) for f in step.parameters.get("files", [])
        ):
            return True
    for call in task.evaluator.calls():
        for spec in (call.result, call.expected):
            if spec is not None and spec.type == "cloud_file":
                paths = spec.params.get("path")
                if any(_remote(str(p)) for p in (paths if isinstance(paths, list) else [paths])):
                    return True
    return False


@dataclass
class SupportReport:
    """Occurrence counts (tasks using each feature), split into supported and unsupported."""

    tasks: int = 0
    runnable: int = 0
    offline: int = 0
    #: Runnable tasks whose only metric is `infeasible` (scored from the last action, not files).
    infeasible: int = 0
    #: Per domain: [tasks, runnable, runnable and scored by a metric, runnable with this machine's programs].
    domains: dict[str, list[int]] = field(default_factory=dict)
    #: Runnable tasks whose programs (google-chrome, gimp, vlc, ...) are all installed here.
    local: int = 0
    #: Runnable tasks kept from running here by each missing program.
    missing_programs: Counter[str] = field(default_factory=Counter)
    steps: Counter[str] = field(default_factory=Counter)
    getters: Counter[str] = field(default_factory=Counter)
    metrics: Counter[str] = field(default_factory=Counter)
    unsupported: Counter[str] = field(default_factory=Counter)
    #: Why each unsupported metric cannot score here (not in OSWorld's package, a package to install).
    metric_gaps: dict[str, str] = field(default_factory=dict)

    def supported_names(self, kind: str) -> list[str]:
        """Names of `kind` ("step", "getter", "metric") that at least one task can use here."""
        counter = {"step": self.steps, "getter": self.getters, "metric": self.metrics}[kind]
        return sorted(n for n, c in counter.items() if self.unsupported[f"{kind}:{n}"] < c)

    def unsupported_names(self, kind: str) -> list[str]:
        """Names of `kind` that some task uses in a way this runner cannot run."""
        return sorted(k.split(":", 1)[1] for k in self.unsupported if k.startswith(f"{kind}:"))

    def format(self) -> str:
        """A plain-text table for people."""
        lines = [
            f"scorer: {scorer_tag()} (OSWorld's own metric functions)",
            f"tasks {self.tasks}: runnable here {self.runnable} ({self.runnable - self.infeasible} scored by a "
            f"metric, {self.infeasible} infeasible), of which need no network {self.offline}",
            f"runnable with the programs this machine has: {self.local}",
            "domain: tasks, runnable, scored by a metric, runnable with this machine's programs",
        ]
        for domain, (total, runnable, scored, local) in sorted(self.domains.items()):
            lines.append(f"  {domain:<40} {total:>4} {runnable:>4} {scored:>4} {local:>4}")
        if self.missing_programs:
            lines.append("programs (or apps to open a file type) missing here: runnable tasks that need each")
            for name, count in self.missing_programs.most_common():
                lines.append(f"  {name:<40} {count:>4}")
        for kind, counter in (("step", self.steps), ("getter", self.getters), ("metric", self.metrics)):
            lines.append(f"{kind} types: tasks using each, of which unsupported")
            for name, count in counter.most_common():
                missing = self.unsupported[f"{kind}:{name}"]
                lines.append(f"  {name:<40} {count:>4} {missing or '':>4}")
        for name, reason in sorted(self.metric_gaps.items()):
            lines.append(f"  metric {name}: {reason}")
        return "\n".join(lines)


def support_report(
    tasks: Iterable[OSWorldTask], *, installed: Callable[[str], bool] = installed_here
) -> SupportReport:
    """Count, over `tasks`, how many use each step type, getter and metric, which are
    runnable, and which of those this machine can run (`installed` says which programs exist)."""
    report = SupportReport()
    for task in tasks:
        report.tasks += 1
        per_domain = report.domains.setdefault(task.domain or "(none)", [0, 0, 0, 0])
        per_domain[0] += 1
        report.steps.update({s.type for s in task.all_steps()})
        calls = task.evaluator.calls()
        report.metrics.update({c.func for c in calls})
        report.getters.update({s.type for c in calls for s in (c.result, c.expected) if s is not None})
        gaps = task_gaps(task)
        for gap in gaps:
            report.unsupported[gap] += 1
        for call in calls:
            reason = unsupported_reason(call.func) if call.func != "infeasible" else None
            if reason is not None:
                report.metric_gaps.setdefault(call.func, reason)
        if not gaps:
            report.runnable += 1
            per_domain[1] += 1
            if [c.func for c in calls] == ["infeasible"]:
                report.infeasible += 1
            else:
                per_domain[2] += 1
            if not _needs_network(task) and not needs_network(task):  # the host's downloads, the desktop's web
                report.offline += 1
            missing = sorted(p for p in programs(task) | openers(task) if not installed(p))
            report.missing_programs.update(missing)
            if not missing:
                report.local += 1
                per_domain[3] += 1
    return report

