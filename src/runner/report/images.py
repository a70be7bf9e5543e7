"""Images of a step as the report shows them: the narrator's augmented before/after
pictures and zoom crop (`bjudge.augment_transition`), written once as PNG files under
``<task>/augmented/rollout-<k>/``, or the plain screenshots when the step had no pointer.

Paths are relative to the run folder, so the report opens from disk without a server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bjudge import augment_transition
from core.atomic import write_bytes_atomic
from core.trajectory import RolloutDir, Step, TaskDir

__all__ = ["AUGMENTED_DIR", "ImagePaths", "step_images"]

AUGMENTED_DIR = "augmented"


@dataclass(frozen=True)
class ImagePaths:
    """Relative paths of a step's pictures (None: the step has no such picture)."""

    before: str | None = None
    after: str | None = None
    zoom: str | None = None
    augmented: bool = False


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def step_images(task_dir: TaskDir, rd: RolloutDir, step: Step, root: Path) -> ImagePaths:
    """The step's pictures, augmenting (once) when it has a pointer and both screenshots."""
    before = rd.screenshot_path(step.before_screenshot) if step.before_screenshot else None
    after = rd.screenshot_path(step.after_screenshot) if step.after_screenshot else None
    before = before if before is not None and before.is_file() else None
    after = after if after is not None and after.is_file() else None
    if not (step.pointer and before and after):
        return ImagePaths(before=_rel(before, root) if before else None, after=_rel(after, root) if after else None)
    folder = task_dir.path / AUGMENTED_DIR / rd.path.name
    stem = f"step-{step.index:03d}"
    files = {role: folder / f"{stem}-{role}.png" for role in ("before", "after", "zoom")}
    if not (files["before"].is_file() and files["after"].is_file()):
        shown = augment_transition(before.read_bytes(), after.read_bytes(), step.pointer)
        folder.mkdir(parents=True, exist_ok=True)
        if shown.zoom is not None:  # written first: the pair's presence says all are done
            write_bytes_atomic(files["zoom"], shown.zoom, durable=False)
        write_bytes_atomic(files["before"], shown.before, durable=False)
        write_bytes_atomic(files["after"], shown.after, durable=False)
    zoom = files["zoom"] if files["zoom"].is_file() else None
    return ImagePaths(before=_rel(files["before"], root), after=_rel(files["after"], root),
                      zoom=_rel(zoom, root) if zoom else None, augmented=True)
