"""The flat Agent S3 worker: action grammar, grounding, reflection and the embedded coding
agent. A function of data and a chat model; never touches an environment directly.

One rollout, as the runner drives it::

    worker = Worker(model, WorkerConfig(platform="ubuntu"), Grounder(grounding_model, cfg.grounding))
    proposal = await worker.step(instruction, screenshot_png, (width, height))
    # GUI action: run proposal.code in the environment, then
    worker.record(proposal, exec_result)
    # call_code_agent: run the bounded coding session in the environment's sandbox, then
    result = await worker.run_code_agent(proposal, instruction, screenshot_png, sandbox)
    worker.record(proposal, code_agent=result)

`worker.propose(..., seeds=[...])` gives K candidates for a step guide; wait, done and fail
compile to no code and are the caller's to act on; `RepeatedFormatError` means the model
kept answering unusably.
"""

from agent_s3.actions import (
    ACTION_TYPES,
    CONTROL_ACTIONS,
    Action,
    CallCodeAgent,
    Click,
    Done,
    DragAndDrop,
    Fail,
    HighlightTextSpan,
    HoldAndPress,
    Hotkey,
    Open,
    Scroll,
    SetCellValues,
    SwitchApplications,
    TypeText,
    Wait,
    action_adapter,
    action_call,
)
from agent_s3.calls import ModelCall
from agent_s3.code_agent import CodeAgent, CodeAgentResult, CodeStep
from agent_s3.compile_desktop import Compiled, DesktopOptions, compile_desktop
from agent_s3.config import CodeAgentConfig, EnvironmentFacts, GroundingConfig, WorkerConfig
from agent_s3.grounding import Grounder, GroundingError
from agent_s3.parser import FormatError, ParsedReply, parse_reply
from agent_s3.points import Point
from agent_s3.reference import action_reference
from agent_s3.reflection import Reflection
from agent_s3.text_spans import OcrError, OcrReader
from agent_s3.worker import Compiler, Proposal, RepeatedFormatError, Worker
from agent_s3.workers import platform_worker

__all__ = [
    "ACTION_TYPES",
    "CONTROL_ACTIONS",
    "Action",
    "CallCodeAgent",
    "Click",
    "CodeAgent",
    "CodeAgentConfig",
    "CodeAgentResult",
    "CodeStep",
    "Compiled",
    "Compiler",
    "DesktopOptions",
    "Done",
    "DragAndDrop",
    "EnvironmentFacts",
    "Fail",
    "FormatError",
    "Grounder",
    "GroundingConfig",
    "GroundingError",
    "HighlightTextSpan",
    "HoldAndPress",
    "Hotkey",
    "ModelCall",
    "OcrError",
    "OcrReader",
    "Open",
    "ParsedReply",
    "Point",
    "Proposal",
    "Reflection",
    "RepeatedFormatError",
    "Scroll",
    "SetCellValues",
    "SwitchApplications",
    "TypeText",
    "Wait",
    "Worker",
    "WorkerConfig",
    "action_adapter",
    "action_call",
    "action_reference",
    "compile_desktop",
    "parse_reply",
    "platform_worker",
]
