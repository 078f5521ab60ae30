"""How the triage asks for its answer, and reads it, in each structured-output form (AI_STRUCTURED_OUTPUT).

- `tool`: the one tool, forced, its function `strict` (the provider holds the arguments to its schema);
- `json_schema`: `response_format` as OpenAI structured outputs and vLLM's guided decoding take it;
- `json_object`: `response_format: {"type": "json_object", "schema": ...}`, which llama.cpp's server turns
  into a grammar: a small model that ignores a forced tool still answers in the schema's shape.

Whichever way it arrives, the answer passes the same gate (the System Actor's one tool) and the same strict
pydantic model, `TriageProposal`.
"""

import json
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from pydantic import ValidationError

from desk.actors import SYSTEM_TRIAGE
from desk.agent.core.provider import Completed, ToolCallRequest
from desk.agent.core.tools import Refusal
from desk.agent.triage import prompt
from desk.agent.triage.models import TriageProposal
from desk.agent.triage.tool import NAME, REGISTRY

StructuredOutput = Literal["tool", "json_schema", "json_object"]
FORMS: tuple[StructuredOutput, ...] = ("tool", "json_schema", "json_object")
RAW_KEPT = 2000  # of an answer that is not JSON, what the run's record keeps


@dataclass(frozen=True)
class Answer:
    """The proposal (None: invalid or missing), and the call as recorded: the request and its parsed arguments."""

    proposal: TriageProposal | None
    request: ToolCallRequest
    args: dict[str, Any]


def asked(form: StructuredOutput) -> dict[str, Any]:
    """`Provider.stream`'s arguments beside the messages: the tools, and how the answer is forced."""
    schema = prompt.TOOL["function"]["parameters"]
    match form:
        case "tool":
            strict = {**prompt.TOOL, "function": {**prompt.TOOL["function"], "strict": True}}
            return {"tools": [strict], "tool_choice": prompt.TOOL_CHOICE}
        case "json_schema":
            return {"tools": [], "response_format": {"type": "json_schema", "json_schema": _named(schema)}}
        case "json_object":
            return {"tools": [], "response_format": {"type": "json_object", "schema": schema}}
        case _:
            assert_never(form)


def read(completed: Completed, form: StructuredOutput) -> Answer:
    """The model's answer, from its one tool call (`tool`) or from its text (the `response_format` forms)."""
    if form == "tool":
        calls = completed.tool_calls
        if len(calls) != 1:
            return Answer(None, calls[0] if calls else ToolCallRequest(id="", name="(none)", arguments=""), {})
        request = calls[0]
    else:  # the text is the tool's arguments: recorded as the one call it stands for
        request = ToolCallRequest(id="", name=NAME, arguments=completed.text.strip())
    tool = REGISTRY.gate(request.name, mode="triage", actor=SYSTEM_TRIAGE, ai_enabled=True)
    if isinstance(tool, Refusal):  # another agent's tool, or none at all
        return Answer(None, request, {})
    try:
        raw = json.loads(request.arguments)
    except json.JSONDecodeError:
        return Answer(None, request, {"raw": request.arguments[:RAW_KEPT]})
    args = raw if isinstance(raw, dict) else {"raw": raw}
    try:
        return Answer(tool.args.model_validate(raw), request, args)
    except ValidationError:
        return Answer(None, request, args)


def _named(schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": NAME, "schema": schema, "strict": True}
