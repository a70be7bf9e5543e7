"""Per-task state shared by setup steps, getters and metrics, and where local files come from.

This runner has no network: a `download` or `cloud_file` URL is served only from a local path
(``file://...``, an absolute path, or a path relative to the task file) or from the task's
cache folder, which uses OSWorld's cache names so an OSWorld cache can be copied in. Local
paths must lie inside the task's file tree (by default the folder two levels above the task
file, i.e. the root of an ``examples/<domain>/<id>.json`` layout) or the cache, so a task
file cannot copy arbitrary host files (keys, credentials) into a desktop.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from core.trajectory import Task
from environments.tasks.errors import TaskRunError

__all__ = ["TaskContext", "download_cache_name", "resolve_local"]


@dataclass
class TaskContext:
    """One task being set up or scored against one environment."""

    task: Task
    #: Host-side folder for downloaded inputs, fetched results and saved command outputs.
    cache_dir: Path
    #: Replaces ``{CLIENT_PASSWORD}`` in commands (OSWorld's desktop user password).
    client_password: str = "password"
    #: Filled on first use of a ``{SCREEN_*}`` placeholder (asked of the desktop), else 1920×1080.
    screen_size: tuple[int, int] | None = None
    #: Host folders local files may come from; empty means the task's tree (see module doc).
    file_roots: tuple[Path, ...] = ()
    #: OSWorld's proxy is set up for this task: Chrome launches get its --proxy-server,
    #: getters see ``current_use_proxy`` (OSWorld's ``use_proxy``).
    use_proxy: bool = False

    @property
    def task_id(self) -> str:
        return self.task.id

    def allowed_roots(self) -> tuple[Path, ...]:
        """Where `resolve_local` may read: `file_roots` (or the task's tree) and the cache."""
        roots = list(self.file_roots)
        if not roots and self.task.base_dir is not None:
            roots.append(self.task.base_dir.parent.parent)
        return (*(r.resolve() for r in roots), self.cache_dir.resolve())

    def cache_path(self, name: str) -> Path:
        """A file inside the cache folder; names that climb out of it are refused."""
        path = (self.cache_dir / name).resolve()
        if not path.is_relative_to(self.cache_dir.resolve()):
            raise TaskRunError(f"task {self.task_id}: cache file name {name!r} leaves the cache folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        return path


def download_cache_name(url: str, vm_path: str) -> str:
    """The cache file name OSWorld's `SetupController._download_setup` looks for before downloading."""
    return f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_{Path(vm_path).name}"


def resolve_local(ctx: TaskContext, url: str, cached_name: str) -> Path:
    """The host file that stands for `url`: a local path, else the cached copy, else an error."""
    parsed = urlparse(url)
    candidate: Path | None = None
    if parsed.scheme == "file":
        candidate = Path(unquote(parsed.path))
    elif parsed.scheme in ("",) or (len(parsed.scheme) == 1 and url[1:3] in (":\\", ":/")):
        candidate = Path(url)
        if not candidate.is_absolute() and ctx.task.base_dir is not None:
            candidate = ctx.task.base_dir / candidate
    if candidate is not None and candidate.is_file():
        resolved = candidate.resolve()
        if not any(resolved.is_relative_to(root) for root in ctx.allowed_roots()):
            raise TaskRunError(
                f"task {ctx.task_id}: local file {candidate} is outside the task's folders; "
                "copy it beside the task or into its cache"
            )
        return resolved
    cached = ctx.cache_dir / cached_name
    if cached.is_file():
        return cached
    if candidate is not None:
        raise TaskRunError(
            f"task {ctx.task_id}: local file {candidate} does not exist; fix the path in the task"
        )
    raise TaskRunError(
        f"task {ctx.task_id}: cannot fetch {url} (no network here); put the file at {cached} and run again"
    )
