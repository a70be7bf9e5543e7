"""Settings of the ``wide`` strategy: N rollouts of a task from a model mixture, one judge.

The section ``wide`` of the run configuration (``-c wide.rollouts=10``); the command line
sets the common ones with ``--rollouts``, ``--mixture`` and ``--judge``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from bjudge import JUDGES, JudgeConfig, NarrativeConfig
from core.config import Checks

from .mixture import MAX_ROLLOUTS, MixtureEntry
from .model_config import JudgeModelConfig

__all__ = ["JudgeModelConfig", "JudgeName", "WideConfig"]

#: A judge of `bjudge.JUDGES` (``bjudge``: Behavior Judge, narratives and one MCQ call;
#: ``pairwise``, ``independent``, a 1-5 rubric, and ``webjudge``, key points, key screenshots
#: and outcome: the baselines over narratives), a dotted path ``package.module:Class`` to a
#: judge of your own, or ``none``: run the rollouts and choose nothing.
JudgeName = Annotated[str, JUDGES.named("none")]


class WideConfig(BaseModel):
    """N parallel rollouts of one task, each on its own environment, and a judge."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    rollouts: int | None = Field(default=None, ge=1, le=MAX_ROLLOUTS)
    """Rollouts per task; None runs the mixture's total (or 1 without a mixture)."""
    mixture: Annotated[str | list[Any] | None,
                       Checks(lambda data: MixtureEntry, "`runner.mixture.parse_mixture` (a list of `MixtureEntry`)",
                              each=True, label="each entry", key="[]")] = None
    """``provider/model*count,...``, a YAML file, or a list of ``{model, count, base_url?,
    decoding?}``; None runs every rollout on the policy model with stochastic decoding."""
    judge: JudgeName = "bjudge"
    """Which judge picks the rollout: a registered name, ``package.module:Class``, or ``none``."""
    judge_model: JudgeModelConfig | None = None
    """The judge's model; None uses the policy's model."""
    narrator_model: JudgeModelConfig | None = None
    """The model that writes each transition's facts; None uses the judge's model. The
    paper's best setting narrates with one model and judges with another (its Table 10),
    and facts are cached by the narrator, so a new judge re-uses them."""
    concurrency: int | None = Field(default=None, ge=1)
    """Rollouts of one task running at once (and environments started); None: all of them."""
    per_provider: int | None = Field(default=None, ge=1)
    """Calls at once to one provider endpoint by the mixture's models; None keeps the
    provider's default limit."""
    max_retries: int = Field(default=1, ge=0, le=10)
    """Fresh-environment retries of a rollout lost to the world (environment lost, provider
    down) before it is recorded as such."""
    seed: int | None = None
    """Seed of rollout 0 (rollout k gets seed + k) and of the judge's shuffle; None draws
    one, which the rollout headers and selection.json record."""
    temperature: float = Field(default=1.0, ge=0)
    """Preferred temperature of the diverse rollouts whose mixture entry (or the policy) sets
    none; sent only to models that take a temperature (others sample by their default)."""
    narrative: NarrativeConfig = Field(default_factory=NarrativeConfig)
    judging: JudgeConfig = Field(default_factory=JudgeConfig)
    """The judge's own settings (permutations, re-asks, citing facts); its seed is ``seed``."""
