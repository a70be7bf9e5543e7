"""benchmarks/sim_figures.py's replay of the paper's pipeline: rollouts in task order on the
fleet, then narratives, then judging, each on its workers, laid out by list scheduling."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from sim_figures import RunFigures, paper_pipeline


def _figures() -> RunFigures:
    # task a: rollouts of 10 and 30 s; task b: 20 and 20 s (spans are start, end, task)
    return RunFigures(spans=[(0.0, 10.0, "a"), (5.0, 35.0, "a"), (0.0, 20.0, "b"), (3.0, 23.0, "b")],
                      narrative_latencies=[4.0, 4.0, 4.0, 6.0], judge_latencies=[7.0, 9.0])


def test_phases_follow_one_another_on_their_own_workers() -> None:
    replay = paper_pipeline(_figures(), environments=2, workers=2)
    # fleet of 2, task order a, a, b, b: a0 [0,10], a1 [0,30], b0 [10,30], b1 [30,50]
    assert replay["rollouts"] == pytest.approx(50.0)
    assert replay["narratives"] == pytest.approx(10.0)  # [0,4] [0,4] [4,8] [4,10]
    assert replay["judging"] == pytest.approx(9.0)
    assert replay["total"] == pytest.approx(69.0)


def test_harness_waits_lengthen_every_rollout_and_more_environments_shorten_the_phase() -> None:
    waits = paper_pipeline(_figures(), environments=2, workers=2, harness_wait=80.0)
    assert waits["rollouts"] == pytest.approx(50.0 + 2 * 80.0)  # two rollouts in a row on one environment
    wide = paper_pipeline(_figures(), environments=4, workers=100)
    assert wide["rollouts"] == pytest.approx(30.0) and wide["narratives"] == pytest.approx(6.0)
