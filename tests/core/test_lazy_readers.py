"""Readers load only what they are asked for: headers without steps, one step without the
others, steps one at a time."""

from __future__ import annotations

from typing import Any

import pytest

from core.trajectory import RolloutDir, RunLayout


@pytest.fixture
def rollout(layout: RunLayout, make: Any) -> RolloutDir:
    rd = layout.rollout("task-a", 0)
    rd.start(make.info("task-a", 0))
    for i in range(8):
        rd.append_step(
            make.step(i), screenshots={"before": make.png(i, "before"), "after": make.png(i, "after")}
        )
    rd.finish("done")
    return rd


def _corrupt_all_lines_but(rd: RolloutDir, keep: set[int]) -> None:
    lines = rd.traj_path.read_bytes().split(b"\n")[:-1]
    rd.traj_path.write_bytes(
        b"".join((line if i in keep else b"{broken") + b"\n" for i, line in enumerate(lines))
    )


def test_headers_read_no_step(layout: RunLayout, rollout: RolloutDir, parsed: list[str]) -> None:
    rollout.traj_path.write_bytes(b"this is not a step log\n")
    headers = layout.headers()
    assert headers["task-a"][0] is not None and headers["task-a"][0].step_count == 8
    assert parsed == []


def test_one_step_parses_only_its_own_line(rollout: RolloutDir, parsed: list[str]) -> None:
    _corrupt_all_lines_but(rollout, keep={5})
    step = rollout.read_step(5)
    assert step.index == 5 and step.after_screenshot == "step-0005-after.png"
    assert parsed == ["json"]
    with pytest.raises(IndexError, match="no step 8"):
        rollout.read_step(8)


def test_one_step_and_its_image_without_the_other_images(rollout: RolloutDir, make: Any) -> None:
    for png in rollout.path.glob("step-*.png"):
        if not png.name.startswith("step-0003"):
            png.unlink()
    step = rollout.read_step(3)
    assert rollout.read_screenshot(step, "before") == make.png(3, "before")


def test_steps_are_parsed_one_at_a_time(rollout: RolloutDir, parsed: list[str]) -> None:
    _corrupt_all_lines_but(rollout, keep={0, 1, 2})
    steps = rollout.iter_steps()
    assert [next(steps).index for _ in range(3)] == [0, 1, 2]
    assert len(parsed) == 3
    with pytest.raises(ValueError, match=r"traj\.jsonl:4: not a JSON line"):
        next(steps)


def test_counting_steps_parses_none(rollout: RolloutDir, parsed: list[str]) -> None:
    _corrupt_all_lines_but(rollout, keep=set())
    assert rollout.step_count() == 8
    assert parsed == []


def test_a_torn_last_step_is_invisible_to_readers(rollout: RolloutDir) -> None:
    with rollout.traj_path.open("ab") as fh:
        fh.write(b'{"schema_version": 1, "index": 8, "thou')
    assert rollout.step_count() == 8
    assert [s.index for s in rollout.iter_steps()] == list(range(8))
    with pytest.raises(IndexError):
        rollout.read_step(8)
