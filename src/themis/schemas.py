"""The JSON each OS-Themis role must answer with, as pydantic schemas.

These are what the model writes; rules that need the trajectory (which steps exist, which
may be milestones) are checked by the roles themselves, on top of these shapes. The same
models are the schemas of native structured outputs, so a reply is validated once, whichever
way it came.

Each schema reads two vocabularies, both listed: the reply contracts of the OS-Themis paper
(its appendix tables 13-16: ``key_steps``/``step_index``/``assessment_goal``,
``verified_steps``, ``issues``/``related_steps``, ``final_decision``/``failure_window``/
``qa_answer_review``) as each class's `ALIASES`, and the project's condensed one as its
field names. Keys the paper writes that carry nothing read here are `IGNORED`; any other key
is refused (it may be a misspelt field, ``qa_review``, or an answer under another name,
``risks``), and so is a missing required field: the role is asked again rather than read
with a default. Labels are read case- and spacing-insensitively with the synonyms listed in
`STEP_VERDICTS` / `DECISIONS`; ``null`` stands for an empty list, and a bare boolean or 0/1
is read where a label is expected. A value outside every vocabulary is an error.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, get_origin

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from core.replies import contract_keys, key_name

__all__ = [
    "DECISIONS",
    "STEP_VERDICTS",
    "Concern",
    "ConcernKind",
    "EvidenceCue",
    "FailureWindow",
    "JudgeReply",
    "LastKReply",
    "Milestone",
    "QAReview",
    "ReviewerReply",
    "SelectorReply",
    "SequentialReply",
    "Suggestion",
    "VerifierReply",
    "norm_word",
]

#: A string with something in it besides spaces.
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]

StepVerdict = Literal["success", "failure", "uncertain"]
Decision = Literal["completed", "not_completed", "uncertain"]

#: Synonyms models write for each label, after `norm_word`.
STEP_VERDICTS: dict[str, StepVerdict] = {
    **dict.fromkeys(("success", "succeeded", "successful", "pass", "passed", "yes", "true", "1", "met",
                     "achieved", "verified", "completed", "complete", "done"), "success"),
    **dict.fromkeys(("failure", "fail", "failed", "no", "false", "0", "not_met", "unmet", "not_achieved",
                     "not_completed", "incomplete", "unsuccessful"), "failure"),
    **dict.fromkeys(("uncertain", "unsure", "unknown", "unclear", "undetermined", "inconclusive",
                     "ambiguous", "cannot_determine", "-1"), "uncertain"),
}
DECISIONS: dict[str, Decision] = {
    **dict.fromkeys(("completed", "complete", "success", "successful", "succeeded", "done", "yes", "true",
                     "1", "task_completed"), "completed"),
    **dict.fromkeys(("not_completed", "notcompleted", "not_complete", "incomplete", "uncompleted",
                     "failure", "failed", "fail", "unsuccessful", "no", "false", "0", "task_not_completed"),
                    "not_completed"),
    **dict.fromkeys(("uncertain", "unsure", "unknown", "unclear", "undetermined", "inconclusive", "-1"),
                    "uncertain"),
}
_COMPLIANCE = ("exact", "violates", "not_available", "not_applicable")


def norm_word(value: object) -> object:
    """A label as a key: lower case, spaces and hyphens as ``_``, quotes and a final stop
    dropped (``" Not Completed."`` -> ``not_completed``); non-strings unchanged."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        return value
    word = value.strip().strip("\"'`*").rstrip(".!").strip().lower()
    return "_".join(word.replace("-", " ").replace("_", " ").split())


def _label(value: object, table: dict[str, Any]) -> object:
    key = norm_word(value)
    return table.get(key, value) if isinstance(key, str) else value


def _flag(value: object) -> object:
    """true/false as the paper's prompts write them ("true", "yes", 1), else unchanged."""
    word = norm_word(value)
    return {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}.get(str(word), value)


class _Reply(BaseModel):
    """A reply contract: its fields, the paper's names for them, and the keys it ignores."""

    model_config = ConfigDict(extra="forbid")

    #: The paper's name -> the field it fills.
    ALIASES: ClassVar[dict[str, str]] = {}
    #: Keys the paper writes that carry nothing read here.
    IGNORED: ClassVar[frozenset[str]] = frozenset()
    #: Keys of the paper's shape that `_shape` reads into fields of another name.
    WORDS: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _contract(cls, data: object) -> object:
        if not isinstance(data, dict):
            return cls._unwrap(data)
        data = cls._unwrap(data)
        if not isinstance(data, dict):
            return data
        out = contract_keys(data, fields={*cls.model_fields, *cls.WORDS}, aliases=cls.ALIASES, ignored=cls.IGNORED)
        lists = {name for name, f in cls.model_fields.items() if get_origin(f.annotation) is list}
        out = cls._shape({k: ([] if v is None and k in lists else v) for k, v in out.items()})
        missing = [f for f, info in cls.model_fields.items() if info.is_required() and f not in out]
        if missing:
            paper = any(key_name(k) in cls.ALIASES for k in data)
            theirs = {field: alias for alias, field in reversed(list(cls.ALIASES.items()))}
            names = ", ".join(f'"{theirs.get(f, f) if paper else f}"' for f in missing)
            raise ValueError(f"missing {names}")
        return out

    @classmethod
    def _unwrap(cls, data: Any) -> Any:
        """Before the keys are read: a reply's other shapes made into this one."""
        return data

    @classmethod
    def _shape(cls, data: dict[str, Any]) -> dict[str, Any]:
        """After the keys are read: values the paper spells differently."""
        return data


class Milestone(_Reply):
    """A step whose outcome decides the task, and the observable state that proves it."""

    ALIASES: ClassVar[dict[str, str]] = {"step_index": "step", "assessment_goal": "goal", "why_important": "why"}

    step: int = Field(ge=0)
    """Index of the step whose before/after screens are checked."""
    goal: Text
    """The assessment goal: what must be visible after the step for it to count."""
    why: Text
    """Why the task cannot be complete without this."""


class SelectorReply(_Reply):
    """New milestones to verify, or a stop with its reason (or both: these, then stop).

    It must say one of them: an object with neither milestones nor a stop is refused."""

    ALIASES: ClassVar[dict[str, str]] = {"key_steps": "milestones", "reason_to_stop": "reason",
                                         "reason_to_continue": "reason", "rationale": "reason"}
    IGNORED: ClassVar[frozenset[str]] = frozenset({"status_hypothesis"})
    WORDS: ClassVar[frozenset[str]] = frozenset({"need_more_steps"})

    milestones: list[Milestone] = Field(default_factory=list)
    done: bool = False
    """True: no further milestones are needed after these."""
    reason: str = ""
    """Why these milestones (or why stop) in one to three sentences."""

    @classmethod
    def _shape(cls, data: dict[str, Any]) -> dict[str, Any]:
        if "need_more_steps" in data:
            data = dict(data)
            raw = data.pop("need_more_steps")
            more = _flag(raw)
            if not isinstance(more, bool):
                raise ValueError(f"need_more_steps must be true or false, not {raw!r}")
            if "done" in data and _flag(data["done"]) is more:
                raise ValueError("\"done\" and \"need_more_steps\" contradict each other; give one of them")
            data["done"] = not more
        if "milestones" not in data and "done" not in data:
            raise ValueError("the reply needs \"key_steps\" (the steps to verify) or \"need_more_steps\": false "
                             "with \"reason_to_stop\"")
        return data


class Suggestion(_Reply):
    """A goal the verifier proposes the selector check next (the paper's ``suggested_goals``)."""

    ALIASES: ClassVar[dict[str, str]] = {"proposed_goal": "goal"}

    goal: Text
    why: str = ""

    @classmethod
    def _unwrap(cls, data: Any) -> Any:
        return {"goal": data} if isinstance(data, str) else data


class _FeedbackBlock(_Reply):
    """The paper's ``selector_feedback`` block of a verifier reply."""

    need_additional_checks: bool | Literal["uncertain"] | None = None
    reasoning: str = ""
    suggested_goals: list[Suggestion] = Field(default_factory=list)

    @field_validator("need_additional_checks", mode="before")
    @classmethod
    def _need(cls, value: object) -> object:
        word = _flag(value)
        return "uncertain" if norm_word(word) in ("uncertain", "unsure", "unknown") else word


class VerifierReply(_Reply):
    """The verdict on one milestone from its step's before and after screens."""

    ALIASES: ClassVar[dict[str, str]] = {"step_index": "step", "notes": "feedback", "overall_summary": "summary"}
    #: The paper's verifier echoes the goal it was given.
    IGNORED: ClassVar[frozenset[str]] = frozenset({"assessment_goal"})
    WORDS: ClassVar[frozenset[str]] = frozenset({"selector_feedback"})

    step: int
    verdict: StepVerdict
    """``success`` when the after-screen shows the assessment goal met, ``failure`` when it
    shows it unmet, ``uncertain`` when the screens cannot tell."""
    evidence: list[str] = Field(default_factory=list)
    """Short, checkable observations from the screenshots."""
    feedback: str = ""
    """The paper's ``notes``: what is wrong, missing or unresolved."""
    suggestions: list[Suggestion] = Field(default_factory=list)
    """Goals to verify next, for the selector (never step numbers)."""
    more_checks: bool | None = None
    """The paper's ``need_additional_checks`` (None for its "uncertain")."""
    summary: str = ""

    @classmethod
    def _unwrap(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "verified_steps" not in data:
            return data
        out = {k: v for k, v in data.items() if k != "verified_steps"}
        steps = data["verified_steps"]
        if isinstance(steps, list) and len(steps) == 1 and isinstance(steps[0], dict):
            steps = steps[0]
        if not isinstance(steps, dict):
            raise ValueError("verified_steps must hold exactly one entry: the step you were asked about")
        clash = sorted(k for k in steps if k in out and out[k] != steps[k])
        if clash:
            raise ValueError(f"{clash[0]!r} is given both inside and outside verified_steps; give it once")
        return {**out, **steps}

    @classmethod
    def _shape(cls, data: dict[str, Any]) -> dict[str, Any]:
        if "selector_feedback" not in data:
            return data
        out = dict(data)
        block = out.pop("selector_feedback")
        if block is None:
            return out
        fb = _FeedbackBlock.model_validate(block)
        if fb.suggested_goals:
            out.setdefault("suggestions", fb.suggested_goals)
        need = fb.need_additional_checks
        out.setdefault("more_checks", need if isinstance(need, bool) else None)
        if fb.reasoning and not str(out.get("feedback") or "").strip():
            out["feedback"] = fb.reasoning
        return out

    @field_validator("verdict", mode="before")
    @classmethod
    def _verdict(cls, value: object) -> object:
        return _label(value, STEP_VERDICTS)

    @field_validator("evidence", mode="before")
    @classmethod
    def _one_evidence(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value


ConcernKind = Literal["missing_milestone", "lenient_criterion", "uncaptured_failure", "weak_evidence"]
#: The paper's risk words, and the synonyms models use for them.
SEVERITIES = {"blocker": "blocker", "high": "blocker", "critical": "blocker", "warning": "warning", "low": "warning",
              "medium": "warning", "minor": "warning", "info": "warning"}


class Concern(_Reply):
    """One problem with the milestone set or the verdicts, tied to what can be seen."""

    ALIASES: ClassVar[dict[str, str]] = {"summary": "issue", "related_steps": "steps", "evidence_needed": "query",
                                         "risk": "severity", "notes": "evidence"}
    IGNORED: ClassVar[frozenset[str]] = frozenset({"id"})

    kind: ConcernKind | None = None
    """One of §3.3's four concern types, when the reviewer names it."""
    issue: Text
    """What is wrong, in one sentence (the paper's ``summary``)."""
    evidence: str = ""
    """The observable signal (step, screen, text) that raises the concern (``notes``)."""
    steps: list[int] = Field(default_factory=list)
    """Steps the concern is about (``related_steps``; empty when unknown)."""
    query: Text
    """What to verify to confirm or refute it (``evidence_needed``)."""
    severity: Literal["blocker", "warning"] = "blocker"
    """The paper's ``risk``: blockers send the milestones back; warnings are reminders. Left
    out, a concern blocks: the conservative reading."""

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, value: object) -> object:
        return norm_word(value) if value is not None else None

    @field_validator("severity", mode="before")
    @classmethod
    def _severity(cls, value: object) -> object:
        word = norm_word(value)
        return SEVERITIES.get(str(word), word)

    @field_validator("evidence", mode="before")
    @classmethod
    def _evidence_text(cls, value: object) -> object:
        return "" if value is None else value


class ReviewerReply(_Reply):
    """The audit: concerns to send back; ``sound`` when none of them is a blocker.

    The concerns list is required (``"issues": []`` says there are none): an object without
    it is no audit, whatever else it holds."""

    ALIASES: ClassVar[dict[str, str]] = {"issues": "concerns", "overall_commentary": "summary"}

    sound: bool
    concerns: list[Concern]
    summary: str = ""

    @classmethod
    def _shape(cls, data: dict[str, Any]) -> dict[str, Any]:
        if "concerns" not in data:
            raise ValueError("the reply has no \"issues\" list; list the issues, or give \"issues\": [] when "
                             "there are none")
        if "sound" not in data and isinstance(data["concerns"], list):
            # The paper's reviewer has no flag: the audit is sound when no issue blocks.
            blocking = [c for c in data["concerns"] if not isinstance(c, dict) or SEVERITIES.get(
                str(norm_word(next((v for k, v in c.items() if str(k).lower() in ("risk", "severity")), "blocker"))),
                "blocker") == "blocker"]
            data = {**data, "sound": not blocking}
        return data


class QAReview(_Reply):
    """For question-answering tasks: the final answer and whether it is right and well formed."""

    ALIASES: ClassVar[dict[str, str]] = {"is_qa_task": "is_qa", "last_agent_answer": "final_answer",
                                         "compliance_verdict": "compliance"}

    is_qa: bool
    final_answer: str = ""
    """The agent's last answer, verbatim."""
    answer_ok: bool | None = None
    """True only when content and format are verified to match the question."""
    compliance: Literal["exact", "violates", "not_available", "not_applicable"] | None = None
    """The paper's ``compliance_verdict``, when given."""
    notes: str = ""

    @classmethod
    def _shape(cls, data: dict[str, Any]) -> dict[str, Any]:
        out = dict(data)
        if out.get("final_answer") is None:
            out["final_answer"] = ""
        if "compliance" in out and out["compliance"] is not None:
            word = norm_word(out["compliance"])
            if word not in _COMPLIANCE:
                raise ValueError(f"compliance_verdict must be one of {', '.join(_COMPLIANCE)}, not "
                                 f"{out['compliance']!r}")
            out["compliance"] = word
            if "answer_ok" not in out:
                out["answer_ok"] = {"exact": True, "violates": False, "not_available": False}.get(str(word))
        return out


class EvidenceCue(_Reply):
    """One entry of the judge's ``critical_evidence``: a step (-1: the task as a whole)."""

    ALIASES: ClassVar[dict[str, str]] = {"step_index": "step"}

    step: int = Field(ge=-1)
    verdict: StepVerdict
    cue: str = ""

    @field_validator("verdict", mode="before")
    @classmethod
    def _verdict(cls, value: object) -> object:
        return _label(value, STEP_VERDICTS)


class FailureWindow(_Reply):
    """Where failure or doubt begins and ends (-1, -1 for a completed task)."""

    ALIASES: ClassVar[dict[str, str]] = {"start_step": "start", "end_step": "end"}

    start: int = Field(ge=-1)
    end: int = Field(ge=-1)
    reason: str = ""

    @classmethod
    def _shape(cls, data: dict[str, Any]) -> dict[str, Any]:
        if "end" not in data and "start" in data:
            return {**data, "end": data["start"]}
        return data


class JudgeReply(_Reply):
    """The final decision on the whole deliberation.

    The QA block is required (the paper: "always include the qa_answer_review object"): a
    reply without it could pass a question-answering task with its answer unchecked."""

    ALIASES: ClassVar[dict[str, str]] = {"final_decision": "decision", "justification": "reason",
                                         "missing_conditions": "missing", "critical_evidence": "evidence",
                                         "qa_answer_review": "qa"}

    decision: Decision
    reason: Text
    missing: list[str] = Field(default_factory=list)
    """Conditions of the goal that are unmet or unproven."""
    key_steps: list[int] = Field(default_factory=list)
    """Steps whose evidence decided it."""
    evidence: list[EvidenceCue] = Field(default_factory=list)
    """Per-step evidence cues (the paper's ``critical_evidence``)."""
    failure_window: FailureWindow | None = None
    qa: QAReview

    @classmethod
    def _shape(cls, data: dict[str, Any]) -> dict[str, Any]:
        out = dict(data)
        if "key_steps" not in out and isinstance(out.get("evidence"), list):
            steps = [next((v for k, v in e.items() if str(k).lower() in ("step_index", "step")), None)
                     for e in out["evidence"] if isinstance(e, dict)]
            out["key_steps"] = [s for s in steps if isinstance(s, int) and not isinstance(s, bool) and s >= 0]
        if "qa" in out and out["qa"] is None:
            raise ValueError("the reply has no \"qa_answer_review\" block; include it (\"is_qa_task\": false for a "
                             "task that asks no question)")
        return out

    @field_validator("decision", mode="before")
    @classmethod
    def _decision(cls, value: object) -> object:
        return _label(value, DECISIONS)


class LastKReply(_Reply):
    """The last-K baseline: one look at the final screens."""

    reason: Text
    score: Literal[0, 1]

    @field_validator("score", mode="before")
    @classmethod
    def _score(cls, value: object) -> object:
        word = _label(value, DECISIONS)
        return {"completed": 1, "not_completed": 0}.get(str(word), value)


class SequentialReply(_Reply):
    """The sequential baseline: does this one screen show the goal met?"""

    reason: Text
    satisfied: bool

    @field_validator("satisfied", mode="before")
    @classmethod
    def _satisfied(cls, value: object) -> object:
        word = _label(value, DECISIONS)
        return {"completed": True, "not_completed": False}.get(str(word), value)
