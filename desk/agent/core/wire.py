"""The provider's stream chunks as the desk reads them: strictly, every field typed (SEC-3), unknown ones ignored."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError


class _Wire(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class FunctionDelta(_Wire):
    name: str | None = None
    arguments: str | None = None


class ToolCallDelta(_Wire):
    index: NonNegativeInt  # parallel calls arrive interleaved; the index says which one a piece extends
    id: str | None = None
    function: FunctionDelta | None = None


class Delta(_Wire):
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class Choice(_Wire):  # we never ask for n > 1, so there is one choice
    delta: Delta | None = None
    finish_reason: str | None = None


class WireUsage(_Wire):
    prompt_tokens: NonNegativeInt
    completion_tokens: NonNegativeInt


class Chunk(_Wire):
    choices: list[Choice] = Field(default_factory=list)
    usage: WireUsage | None = None
    error: Any = None  # some providers report a mid-stream failure as a chunk


def parse(data: str) -> Chunk | None:
    """One `data:` payload as a chunk; None when it is not one."""
    try:
        return Chunk.model_validate_json(data)
    except ValidationError:  # its text quotes the input, which may echo the prompt: never pass it on
        return None
