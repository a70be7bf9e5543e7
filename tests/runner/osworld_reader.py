"""OSWorld's result reader, step by step, to check our export against its contract.

Followed (read, not copied) from OSWorld's ``show_result.py`` ``get_result(action_space,
use_model, observation_type, result_dir)`` — the copy read is xlang-ai/Spider2-V
``show_result.py`` at 39bd6f6, the same function OSWorld's run scripts carry as
``get_result`` (e.g. ljxpython/OSWorldUse ``run_multienv.py``) — and from
``lib_run_single.py`` (karakuri-ai/OSWorld-JP at d936d4e, ``run_single_example``), which
writes each task's score to ``result.txt`` as ``f"{result}\\n"``. What it does:

1. the target is ``<result_dir>/<action_space>/<observation_type>/<model>``; missing → no result;
2. every *directory* in the target is a domain (files such as ``args.json`` are passed over);
3. every directory in a domain holding a file named ``result.txt`` is a finished task;
4. its score is ``float(text)``, or ``float(bool(text))`` when the text is no number;
5. per domain the success rate is the mean of its tasks' scores; overall, the mean over all
   tasks (``sum(all_result) / len(all_result)``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass
class ReaderResult:
    #: domain → task id → score (``all_result_for_analysis``).
    scores: dict[str, dict[str, float]] = field(default_factory=dict)

    def domain_rate(self, domain: str) -> float:
        values = list(self.scores[domain].values())
        return sum(values) / len(values)

    @property
    def overall(self) -> float:
        values = [v for d in self.scores.values() for v in d.values()]
        return sum(values) / len(values)


def _score(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float(bool(text))


def get_result(action_space: str, use_model: str, observation_type: str, result_dir: str) -> ReaderResult | None:
    target_dir = os.path.join(result_dir, action_space, observation_type, use_model)  # step 1
    if not os.path.exists(target_dir):
        return None
    out = ReaderResult()
    for domain in os.listdir(target_dir):
        domain_path = os.path.join(target_dir, domain)
        if not os.path.isdir(domain_path):  # step 2
            continue
        for example_id in os.listdir(domain_path):
            example_path = os.path.join(domain_path, example_id)
            if os.path.isdir(example_path) and "result.txt" in os.listdir(example_path):  # step 3
                with open(os.path.join(example_path, "result.txt")) as f:
                    out.scores.setdefault(domain, {})[example_id] = _score(f.read())  # step 4
    return out if out.scores else None
