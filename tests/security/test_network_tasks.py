"""Which tasks a local desktop gives the internet: the rule of `environments.tasks.network`
on a corpus of task files (tests/security/corpus/network_tasks.jsonl) and on OSWorld's own
examples, and through the run record's round trip (a suite's ``requires_network`` flag
survives a run folder's task.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.trajectory import Task
from environments.tasks import load_task, parse_task
from environments.tasks.network import needs_network, network_reason
from reference_data import OSWORLD_TASKS, requires_osworld_tasks

_CORPUS = Path(__file__).with_name("corpus") / "network_tasks.jsonl"
_CASES = [json.loads(line) for line in _CORPUS.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("case", _CASES, ids=[c["case"] for c in _CASES])
def test_network_rule_on_the_corpus(case: dict) -> None:
    # a "raw" case is a run folder's record (a free-text task has no evaluator), the rest task files
    task = Task.model_validate(case["task"]) if case.get("raw") else parse_task(case["task"], case["case"])
    assert needs_network(task) is case["expect"], network_reason(task)
    assert (network_reason(task) is None) is (not case["expect"])


def test_the_flag_survives_the_run_record() -> None:
    flagged = next(c for c in _CASES if c["case"] == "own suite says so")
    task = parse_task(flagged["task"])
    assert needs_network(Task.model_validate_json(task.model_dump_json()))


@requires_osworld_tasks
def test_osworld_examples_network_tasks() -> None:
    examples = OSWORLD_TASKS / "examples"
    counted = {"chrome": [0, 0], "os": [0, 0], "libreoffice_calc": [0, 0]}
    for domain, pair in counted.items():
        for path in sorted((examples / domain).glob("*.json")):
            pair[needs_network(load_task(path))] += 1
    assert counted["chrome"][0] == 0 and counted["chrome"][1] > 0  # every browser task
    assert counted["libreoffice_calc"][1] == 0  # their downloads come from the host
    # Two os tasks need the internet to be set up or solved: an apt-get install in the
    # postconfig (5812b315) and "install Spotify" (94d95f96); the others' files come from the host.
    assert counted["os"][1] == 2
