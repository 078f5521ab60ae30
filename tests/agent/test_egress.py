"""SEC-2 on every connection (DNS rebinding): the address the provider client connects to is the one it checked.

The resolver here answers what a test says, and changes its answer, as a rebinding name does; the
fake provider on 127.0.0.1 is what a private address reaches.
"""

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import replace
from urllib.parse import urlsplit

import pytest

from desk.agent.core.provider import AIUnavailable, Provider, TextDelta
from tests.fake_provider import FakeProvider, Turn

MESSAGES = [{"role": "user", "content": "Hello"}]


class ChangingResolver:
    """Answers each lookup with the next of `answers` (the last one again when they run out)."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@pytest.fixture
async def providers() -> AsyncIterator[list[Provider]]:
    made: list[Provider] = []
    yield made
    for provider in made:
        await provider.aclose()


def provider_for(made: list[Provider], url: str, resolver: ChangingResolver, *, allow_private: bool) -> Provider:
    options = {"api_key": "k", "model": "m", "max_output_tokens": 64, "price_in": 0.0, "price_out": 0.0}
    made.append(Provider(base_url=url, resolver=resolver, allow_private=allow_private, **options))
    return made[-1]


async def call(provider: Provider) -> list:
    async with aclosing(provider.stream(MESSAGES, [])) as events:
        return [event async for event in events]


def closing(turn: Turn) -> Turn:
    """The turn, ending its connection: the next call must connect (and look the name up) again."""
    return replace(turn, headers=(*turn.headers, ("connection", "close")))


async def test_a_name_that_now_answers_loopback_is_refused_before_any_connection(
    fake_provider: FakeProvider, providers
):
    # "localhost" would reach the fake through the system's resolver: the check is what stops it.
    port = urlsplit(fake_provider.url).port
    resolver = ChangingResolver(["127.0.0.1"])
    provider = provider_for(providers, f"http://localhost:{port}/v1", resolver, allow_private=False)

    with pytest.raises(AIUnavailable):
        await call(provider)

    assert resolver.asked == [("localhost", port)]
    assert fake_provider.requests == []


async def test_one_internal_answer_among_public_ones_is_refused(fake_provider: FakeProvider, providers):
    resolver = ChangingResolver(["93.184.216.34", "169.254.169.254"])
    provider = provider_for(providers, "https://models.example.com/v1", resolver, allow_private=False)

    with pytest.raises(AIUnavailable):
        await call(provider)

    assert resolver.asked == [("models.example.com", 443)]


async def test_every_connection_looks_the_name_up_again_and_goes_where_the_answer_says(
    fake_provider: FakeProvider, providers
):
    # A name no system resolver knows: the request reaches the fake only through the checked answer,
    # and still names the host it was meant for.
    port = urlsplit(fake_provider.url).port
    resolver = ChangingResolver(["127.0.0.1"], ["127.0.0.2"])  # the fake listens on 127.0.0.1 only
    provider = provider_for(providers, f"http://self-hosted.invalid:{port}/v1", resolver, allow_private=True)
    fake_provider.script(closing(Turn.text("Hello from the model")))

    first = await call(provider)
    with pytest.raises(AIUnavailable):
        await call(provider)  # a new connection: the name now answers elsewhere, and that is where it goes

    assert "".join(event.text for event in first if isinstance(event, TextDelta)) == "Hello from the model"
    assert fake_provider.headers[0]["host"] == f"self-hosted.invalid:{port}"
    assert resolver.asked == [("self-hosted.invalid", port)] * 2
    assert len(fake_provider.requests) == 1
