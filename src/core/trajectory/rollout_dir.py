"""One rollout's folder: its header, its step log and its screenshots.

::

    rollout-<k>/
      rollout.json            RolloutInfo, rewritten atomically when it changes
      traj.jsonl              one Step a line, appended as each step ends
      step-0000-before.png    screenshots, written before the step line naming them
      step-0000-after.png

A step's screenshots are written (atomically) before its line is appended, so a step line
never names a missing file; a kill between the two leaves unreferenced images, which the
next attempt's `start` removes. Steps are appended in index order, so step i is line i and
`read_step` parses that line alone.

The methods block (an fsynced step with two 1 MB screenshots takes a few milliseconds);
from the event loop, call them through ``asyncio.to_thread``.

A finished header records how many steps its log holds; `iter_steps` refuses a finished
rollout whose log holds fewer (a lost or torn last step), naming the file, rather than let
a report or judge present a shorter rollout as the one that ran. On a full disk, `finish`
still ends the header (rewriting it in place, see `_write_info_in_place`), so a rollout
that stopped is never left ``running``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from pydantic import ValidationError

from core import clock
from core.atomic import (
    append_line,
    count_lines,
    make_private_dir,
    read_jsonl,
    read_line,
    repair_jsonl_tail,
    write_bytes_atomic,
    write_json_atomic,
)

from .base import RunFolderError, load_record
from .names import INFO_FILE, SCREENSHOT_ROLES, TRAJ_FILE, screenshot_name, step_image_name
from .rollout import RolloutInfo, RolloutStatus, Trajectory
from .step import Step

__all__ = ["RolloutDir"]


class RolloutDir:
    """Reads and writes ``<run>/<task_id>/rollout-<k>/``. One writer per rollout."""

    def __init__(self, path: Path, task_id: str, index: int, *, durable: bool = True) -> None:
        self.path = path
        self.task_id = task_id
        self.index = index
        self.durable = durable
        self._next_step: int | None = None  # known once this writer has opened the log

    def __repr__(self) -> str:
        return f"RolloutDir({str(self.path)!r})"

    @property
    def info_path(self) -> Path:
        return self.path / INFO_FILE

    @property
    def traj_path(self) -> Path:
        return self.path / TRAJ_FILE

    def exists(self) -> bool:
        return self.info_path.exists()

    # -- header -------------------------------------------------------------------------

    def write_info(self, info: RolloutInfo) -> None:
        """Write (or replace) the header atomically."""
        if info.task_id != self.task_id or info.rollout != self.index:
            raise ValueError(
                f"header for {info.task_id}/rollout-{info.rollout} does not belong in {self.path}"
            )
        make_private_dir(self.path)
        write_json_atomic(self.info_path, info, durable=self.durable)

    def read_info(self) -> RolloutInfo | None:
        """The header, or None if this rollout was never started. Reads no step.

        A header that does not parse is a `RunFolderError` naming the file."""
        try:
            text = self.info_path.read_bytes()
        except FileNotFoundError:
            return None
        return load_record(self.info_path, RolloutInfo, text)

    def start(self, info: RolloutInfo) -> RolloutInfo:
        """Begin (or begin again) this rollout: write the header, then drop any old steps.

        A previous attempt's steps and screenshots are removed and ``attempts`` counts on
        from the previous header. The header goes first, so a kill part-way leaves a
        ``running`` rollout that a resume redoes, never an old status over no steps.
        """
        try:
            previous = self.read_info()
        except RunFolderError:  # a damaged header is replaced; its count of attempts is lost
            previous = None
        attempts = previous.attempts + 1 if previous is not None else info.attempts
        info = info.model_copy(update={"status": "running", "attempts": attempts, "step_count": 0})
        self.write_info(info)
        self.traj_path.unlink(missing_ok=True)
        for png in self.path.glob("step-*.png"):
            png.unlink(missing_ok=True)
        self._next_step = 0
        return info

    def finish(
        self,
        status: RolloutStatus,
        reason: str | None = None,
        *,
        score: float | None = None,
    ) -> RolloutInfo:
        """Mark the rollout ended: status, reason, end time, step count (and score)."""
        if status == "running":
            raise ValueError("finish() needs a terminal status, not 'running'")
        info = self.read_info()
        if info is None:
            raise FileNotFoundError(f"{self.info_path} is missing: start the rollout before finishing it")
        update: dict[str, object] = {
            "status": status,
            "reason": reason,
            "ended_at": clock.now(),
            "step_count": self.step_count(),
        }
        if score is not None:
            update["score"] = score
        info = info.model_copy(update=update)
        try:
            self.write_info(info)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            self._write_info_in_place(info)
        return info

    def _write_info_in_place(self, info: RolloutInfo) -> None:
        """Overwrite the header's own bytes when the disk has no room for a new file.

        The atomic write needs a second copy; a header rewritten in its file mostly fits
        in the blocks the ``running`` header already holds. Not atomic, which is why it is
        only the fallback: a kill in the middle leaves a header `read_info` refuses by name.
        """
        data = info.model_dump_json(indent=2).encode("utf-8") + b"\n"
        fd = os.open(self.info_path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)

    # -- steps --------------------------------------------------------------------------

    def append_step(self, step: Step, screenshots: Mapping[str, bytes] | None = None) -> Step:
        """Store the screenshots (roles ``before``/``after``), then append the step line.

        Returns the step as stored, with its screenshot file names filled in. Steps must
        come in index order: 0, 1, 2 ...
        """
        expected = self._open_log()
        if step.index != expected:
            raise ValueError(
                f"{self.traj_path} holds {expected} steps; the next step is {expected}, not {step.index}"
            )
        names: dict[str, str] = {}
        for role, png in (screenshots or {}).items():
            name = screenshot_name(step.index, role)
            write_bytes_atomic(self.path / name, png, durable=self.durable)
            names[f"{role}_screenshot"] = name
        if names:
            step = step.model_copy(update=names)
        for listed in (step.before_screenshot, step.after_screenshot):
            if listed is not None and not (self.path / listed).is_file():
                raise FileNotFoundError(f"step {step.index} names {listed}, which is not in {self.path}")
        append_line(self.traj_path, step.model_dump_json(), durable=self.durable)
        self._next_step = expected + 1
        return step

    def write_step_image(self, index: int, label: str, png: bytes) -> str:
        """Store a further picture of step `index` (atomically) and return its file name.

        Write it before the step's line is appended, so the line may name it; `start`
        removes it with the other step images when the rollout begins again.
        """
        name = step_image_name(index, label)
        make_private_dir(self.path)
        write_bytes_atomic(self.path / name, png, durable=self.durable)
        return name

    def step_count(self) -> int:
        """Complete steps in the log, counted without parsing any."""
        return count_lines(self.traj_path)

    def read_step(self, index: int) -> Step:
        """Step `index`, parsing only its own line. IndexError if there is no such step."""
        raw = read_line(self.traj_path, index)
        if raw is None:
            raise IndexError(f"{self.traj_path} has no step {index}")
        try:
            step = Step.model_validate_json(raw)
        except ValidationError as exc:
            raise self._bad_line(index + 1, exc) from None
        if step.index != index:
            raise RunFolderError(f"{self.traj_path}:{index + 1} holds step {step.index}, not step {index}")
        return step

    def iter_steps(self) -> Iterator[Step]:
        """Every complete step in order, parsed one at a time.

        A torn last line of a rollout still running is skipped. A finished rollout whose
        log holds fewer steps than its header recorded is refused (`RunFolderError` naming
        the log) once the log is read to its end, as is a line that is not a step.
        """
        seen = 0
        try:
            for number, obj in enumerate(read_jsonl(self.traj_path), start=1):
                try:
                    step = Step.model_validate(obj)
                except ValidationError as exc:
                    raise self._bad_line(number, exc) from None
                seen += 1
                yield step
        except RunFolderError:
            raise
        except ValueError as exc:  # a line that is not JSON; read_jsonl names the file
            raise RunFolderError(str(exc)) from None
        self.check_complete(seen)

    def check_complete(self, steps: int | None = None) -> None:
        """Refuse a finished rollout whose log lost steps its header counted.

        `steps` is how many the log holds when the caller already counted them."""
        info = self.read_info()
        if info is None or not info.finished:
            return
        held = count_lines(self.traj_path) if steps is None else steps
        if held < info.step_count:
            raise RunFolderError(
                f"{self.traj_path} holds {held} steps but {self.info_path} says the finished rollout "
                f"had {info.step_count}: its last steps are missing; run the rollout again "
                "(a resumed run redoes it)"
            )

    def _bad_line(self, number: int, exc: ValidationError) -> RunFolderError:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return RunFolderError(f"{self.traj_path}:{number} is not a valid step ({where}: {first['msg']})")

    def read(self) -> Trajectory:
        """Header and all steps. FileNotFoundError if the rollout was never started."""
        info = self.read_info()
        if info is None:
            raise FileNotFoundError(f"{self.info_path} is missing: this rollout was never started")
        return Trajectory(info=info, steps=list(self.iter_steps()))

    def screenshot_path(self, name: str) -> Path:
        """Where a screenshot named in a step lives."""
        if "/" in name or name.startswith("."):
            raise ValueError(f"{name!r} is not a screenshot file name")
        return self.path / name

    def read_screenshot(self, step: Step, role: str = "after") -> bytes | None:
        """The PNG bytes of a step's screenshot, or None if the step has none for `role`."""
        if role not in SCREENSHOT_ROLES:
            raise ValueError(f"screenshot role {role!r} is not one of {', '.join(SCREENSHOT_ROLES)}")
        name = step.before_screenshot if role == "before" else step.after_screenshot
        return None if name is None else self.screenshot_path(name).read_bytes()

    def _open_log(self) -> int:
        """Prepare this writer's first append: cut a torn tail, count the steps."""
        if self._next_step is None:
            make_private_dir(self.path)
            repair_jsonl_tail(self.traj_path)
            self._next_step = count_lines(self.traj_path)
        return self._next_step
