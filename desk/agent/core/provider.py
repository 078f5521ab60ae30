"""The one LLM adapter: OpenAI-compatible `POST {AI_BASE_URL}/chat/completions`, streamed, with tools.

Provider output is untrusted (SEC-3): every `data:` chunk is parsed strictly, the whole response is
capped in bytes, and a redirect is a failure (SEC-2). Every failure becomes one generic
`AIUnavailable` that still carries what the call must be billed (spec §4.7: failures bill too).
Logs name only the base URL, the model and the kind of failure: never the prompt, the key or the
provider's body (SEC-1).

Close the stream when you stop early, so the upstream call is aborted at once rather than at GC:

    async with contextlib.aclosing(provider.stream(messages, tools)) as events:
        async for event in events: ...
"""

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import httpx

from desk.agent.core import egress, faults, wire
from desk.config import Settings
from desk.errors import DeskError, ErrorCode

log = logging.getLogger(__name__)

# The usual rough rule for English text and JSON; used only when the provider reports no usage.
CHARS_PER_TOKEN = 4
AFTER_DONE_SECONDS = 0.5  # how long the end of a body may take to arrive after [DONE]


@dataclass(frozen=True)
class ToolCallRequest:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it; the runtime parses and validates it


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class Completed:
    tool_calls: list[ToolCallRequest]
    usage: Usage
    finish_reason: str | None
    text: str = ""  # the whole reply's text: the answer itself when it was asked for by `response_format`


ProviderEvent = TextDelta | Completed
NO_USAGE = Usage(0, 0)
# No connection was made (refused, a name that does not resolve, an address SEC-2 refuses, no answer to
# the connect): the model never saw the prompt, so the call is not billed (issue 15).
NEVER_REACHED = (httpx.ConnectError, httpx.ConnectTimeout)


class AIUnavailable(DeskError):
    """The provider call failed. `usage` is what it must still be billed; `kind` names the failure for logs.

    `transient`: it may pass (an outage, a rate limit; desk/agent/core/faults.py), else the request itself is
    refused; `retry_after`: the seconds the provider asked us to wait (its `Retry-After`), if it said.
    """

    code = ErrorCode.AI_UNAVAILABLE
    default_message = "The assistant can't be reached right now. Try again in a minute."

    def __init__(
        self,
        message: str | None = None,
        *,
        usage: Usage = NO_USAGE,
        kind: str = "unknown",
        reached: bool = True,
        transient: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.usage = usage
        self.kind = kind
        self.reached = reached  # False: the call never reached the model (refused, DNS): it costs nothing
        self.transient = transient
        self.retry_after = retry_after


class Provider:
    """A pooled client for one configured provider; `stream` is one model call."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        max_output_tokens: int,
        price_in: float,
        price_out: float,
        transport: httpx.AsyncBaseTransport | None = None,
        allow_private: bool = False,
        resolver: egress.Resolver = egress.resolve,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        max_response_bytes: int = 2_000_000,
        total_timeout: float = 120.0,
        proxy: str | None = None,
    ) -> None:
        self.model = model
        self.max_output_tokens = max_output_tokens
        self.price_in = price_in
        self.price_out = price_out
        self.max_response_bytes = max_response_bytes
        # read_timeout bounds each silence; this bounds a provider that drips a byte just often enough.
        self.total_timeout = total_timeout
        self._url = f"{base_url.rstrip('/')}/chat/completions"
        self._where = egress.loggable(base_url)
        # The key lives only in the client's default headers: not on self, not in any body (SEC-1).
        # identity: the byte cap then counts what we hold, and no gzip bomb can expand past it.
        headers = {"Authorization": f"Bearer {api_key}", "Accept": "text/event-stream", "Accept-Encoding": "identity"}
        self._client = egress.client(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            allow_private=allow_private,
            resolver=resolver,
            proxy=proxy,
            transport=transport,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> "Provider":
        """The provider the environment configures (the URL was already vetted at boot, SEC-2)."""
        if not settings.ai_base_url or settings.ai_api_key is None:
            raise AIUnavailable("The AI assistant is not configured on this desk.", kind="not_configured")
        return cls(
            base_url=settings.ai_base_url,
            api_key=settings.ai_api_key.get_secret_value(),
            model=settings.ai_model,
            max_output_tokens=settings.ai_max_output_tokens,
            price_in=settings.ai_price_per_1m_input,
            price_out=settings.ai_price_per_1m_output,
            allow_private=settings.ai_allow_private_base_url,
            connect_timeout=settings.ai_timeout_connect_s,
            read_timeout=settings.ai_timeout_read_s,
            total_timeout=settings.ai_timeout_total_s,
            proxy=settings.https_proxy,
        )

    def call(
        self,
        messages: list[dict],
        tools: list[dict],
        *,
        tool_choice: dict | None = None,
        response_format: dict | None = None,
    ) -> "Call":
        """A call ready to `send`: its request built (a copilot turn builds its first while its claim is out).

        `tool_choice` forces a call (`{"type": "function", "function": {"name": ...}}`): self-hosted
        servers honour a named function but often ignore `"auto"`, so the triage names its one tool.
        `response_format` asks for the text to follow a JSON schema instead (structured output, a grammar).
        """
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": self.max_output_tokens,  # per-call cap: one call can never blow the daily budget
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = tools  # some providers reject an empty list
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
        if response_format is not None:
            body["response_format"] = response_format
        return Call(self._client.build_request("POST", self._url, json=body), (messages, tools))

    def stream(self, messages: list[dict], tools: list[dict], **asked: Any) -> AsyncGenerator[ProviderEvent, None]:
        """`send` a call made of these, asked for as `call` takes it (`tool_choice`, `response_format`)."""
        return self.send(self.call(messages, tools, **asked))

    async def send(self, call: "Call") -> AsyncGenerator[ProviderEvent, None]:
        """Yield the reply's text as it arrives, then exactly one `Completed`; any failure raises `AIUnavailable`."""
        turn = _Turn(prompt=call.prompt)
        try:
            # Closed however we leave (finished, failed, cancelled, closed early by the consumer), which
            # drops the connection and so aborts the upstream call.
            response = await self._client.send(call.request, stream=True)
            try:
                if not response.is_success:  # the body is never read: it may echo the prompt
                    raise _Failure.of(response)
                lines = _DataLines(self.max_response_bytes)
                deadline = time.monotonic() + self.total_timeout
                body = response.aiter_raw()  # undecoded: a compressed body fails parsing
                async for raw in body:
                    if time.monotonic() > deadline:
                        raise _Failure("deadline")
                    # What came in one read is one delta: a burst of chunks goes out as one frame, at once.
                    text, failure = turn.read(lines.feed(raw))
                    if text:
                        yield TextDelta(text)
                    if failure is not None:
                        raise failure
                    if turn.done:
                        await _read_to_end(body, lines)
                        break
            finally:
                await response.aclose()
            if not (turn.done or turn.finish_reason):
                raise _Failure("truncated")  # clean EOF mid-answer: the reply may be cut anywhere
            completed = turn.completed()
        except _Failure as failure:
            raise self._unavailable(failure.kind, turn, failure.transient, retry_after=failure.retry_after) from None
        except httpx.HTTPError as error:  # connect refused, timeouts, peer closed mid-body, bad encoding
            # `from None`: the chained exception would carry URLs and provider bytes into tracebacks.
            reached = not isinstance(error, NEVER_REACHED)
            raise self._unavailable(
                type(error).__name__, turn, faults.transient_error(error), reached=reached
            ) from None
        log.debug("AI provider call complete (baseUrl=%s, model=%s)", self._where, self.model)
        yield completed

    def cost(self, usage: Usage) -> float:
        """USD for `usage` at the AI_PRICE_PER_1M_INPUT/OUTPUT prices."""
        return (usage.input_tokens * self.price_in + usage.output_tokens * self.price_out) / 1_000_000

    async def aclose(self) -> None:
        await self._client.aclose()

    def _unavailable(
        self, kind: str, turn: "_Turn", transient: bool, *, reached: bool = True, retry_after: float | None = None
    ) -> AIUnavailable:
        # SEC-1: the kind alone (a status, an exception's type), never the provider's body or message
        log.warning("AI provider call failed: %s (baseUrl=%s, model=%s)", kind, self._where, self.model)
        usage = turn.usage() if reached else NO_USAGE
        return AIUnavailable(usage=usage, kind=kind, reached=reached, transient=transient, retry_after=retry_after)


async def _read_to_end(body: AsyncIterator[bytes], lines: "_DataLines") -> None:
    """Read what follows [DONE] (normally just the end of the body), so the connection goes back to the pool.

    A response closed before its end closes its connection, and the next call would pay a new
    TCP and TLS handshake before its first token. A provider that keeps talking after [DONE] is
    cut off after a moment, as before; nothing it sends then is parsed, but every byte still counts.
    """
    with contextlib.suppress(TimeoutError, httpx.HTTPError, _Failure):
        async with asyncio.timeout(AFTER_DONE_SECONDS):
            async for raw in body:
                lines.feed(raw)


class _Failure(Exception):
    def __init__(self, kind: str, *, retry_after: float | None = None, transient: bool | None = None) -> None:
        super().__init__(kind)
        self.kind = kind
        self.transient = kind in faults.TRANSIENT_KINDS if transient is None else transient
        self.retry_after = retry_after

    @classmethod
    def of(cls, response: httpx.Response) -> "_Failure":
        """An answer that is not a success: a redirect (never followed, SEC-2), or its status and Retry-After."""
        if response.is_redirect:
            return cls("redirect", transient=False)
        status = response.status_code
        wait = faults.retry_after(response.headers.get("retry-after"))
        return cls(f"status {status}", transient=faults.transient_status(status), retry_after=wait)


class _DataLines:
    """Splits the byte stream into `data:` payloads, counting every byte against the cap."""

    def __init__(self, limit: int) -> None:
        self._buffer = bytearray()
        self._left = limit

    def feed(self, chunk: bytes) -> list[str]:
        self._left -= len(chunk)
        if self._left < 0:
            raise _Failure("oversize")
        self._buffer += chunk
        end = self._buffer.rfind(b"\n")
        if end < 0:
            return []
        lines = self._buffer[:end].split(b"\n")
        del self._buffer[: end + 1]
        try:  # b"\n" never occurs inside a UTF-8 sequence, so each line decodes on its own
            decoded = [line.decode().rstrip("\r") for line in lines]
        except UnicodeDecodeError:
            raise _Failure("malformed") from None
        # OpenAI-compatible servers put one JSON document on each `data:` line; comments (": ping"),
        # blank separators and other fields carry nothing we use. A multi-line event fails parsing: safe.
        return [line[5:].strip() for line in decoded if line.startswith("data:")]


def _parse(data: str) -> wire.Chunk:
    chunk = wire.parse(data)
    if chunk is None:
        raise _Failure("malformed")
    return chunk


@dataclass
class _PendingCall:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


class Call(NamedTuple):
    request: httpx.Request
    prompt: tuple[list[dict], list[dict]]  # its messages and tools: a call cut short is billed by their size


@dataclass
class _Turn:
    """What one streamed completion has produced so far."""

    prompt: tuple[list[dict], list[dict]]  # sized only when the provider reports no usage (JSON work per call)
    output_chars: int = 0
    calls: dict[int, _PendingCall] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    reported: Usage | None = None
    finish_reason: str | None = None
    done: bool = False

    def read(self, payloads: list[str]) -> tuple[str, _Failure | None]:
        """Fold in one read's `data:` payloads (up to [DONE]); their text, and the failure that cut them short.

        The text before a bad payload is returned with the failure: it is the answer's, and was streamed.
        """
        text = ""
        for data in payloads:
            if data == "[DONE]":
                self.done = True
                break
            try:
                text += self.feed(_parse(data))
            except _Failure as failure:
                return text, failure
        return text, None

    def feed(self, chunk: wire.Chunk) -> str:
        """Fold one chunk in and return its text."""
        if chunk.error is not None:
            raise _Failure("provider_error")
        if chunk.usage is not None:
            self.reported = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
        text = ""
        for choice in chunk.choices:
            self.finish_reason = choice.finish_reason or self.finish_reason
            if choice.delta is None:
                continue
            text += choice.delta.content or ""
            for piece in choice.delta.tool_calls or ():
                call = self.calls.setdefault(piece.index, _PendingCall())
                call.id = call.id or piece.id
                if piece.function:
                    call.name = call.name or piece.function.name  # sent once; some servers repeat it
                    call.arguments.append(piece.function.arguments or "")
                    self.output_chars += len(piece.function.name or "") + len(piece.function.arguments or "")
        self.output_chars += len(text)
        self.texts.append(text)
        return text

    def usage(self) -> Usage:
        if self.reported is not None:
            return self.reported
        # The provider reported no usage (or the call failed first): estimate ~4 chars/token over the
        # prompt JSON and over what was produced, so every call still bills something (spec §4.7).
        return Usage(_tokens(len(json.dumps(list(self.prompt), ensure_ascii=False))), _tokens(self.output_chars))

    def completed(self) -> Completed:
        calls = []
        for index in sorted(self.calls):
            call = self.calls[index]
            if not call.name:
                raise _Failure("malformed")
            # The runtime keys results by id; a provider that omits it still gets a unique one.
            call_id = call.id or f"call_{uuid.uuid4().hex[:24]}"
            calls.append(ToolCallRequest(id=call_id, name=call.name, arguments="".join(call.arguments)))
        return Completed(calls, self.usage(), self.finish_reason, "".join(self.texts))


def _tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)
