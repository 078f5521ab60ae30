"""/metrics: what an operator's Prometheus reads, and only from where DESK_METRICS_ALLOW says."""

import httpx
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from desk.agent.core import budget
from desk.agent.core.breaker import THRESHOLD, Breaker
from desk.config import Settings, use_settings
from tests.fake_provider import Turn
from tests.helpers import tuned


async def scrape(app: FastAPI) -> dict[tuple[str, tuple], float]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://desk.test") as client:
        answer = await client.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_requests_are_counted_and_timed_per_route_not_per_path(app, make_user, client_for, make_order):
    person = await make_user()
    client = await client_for(person)
    order = await make_order(person)
    before = await scrape(app)
    assert (await client.get(f"/api/v1/work-orders/{order.id}")).status_code == 200
    assert (await client.get("/api/v1/work-orders/0123456789abcdef01234567")).status_code == 404
    assert (await client.get("/api/v1/no-such-thing")).status_code == 404
    after = await scrape(app)

    route = "/api/v1/work-orders/{order_id}"
    for status in ("200", "404"):
        key = {"method": "GET", "route": route, "status": status}
        assert value(after, "desk_http_requests_total", **key) - value(before, "desk_http_requests_total", **key) == 1
    unmatched = {"method": "GET", "route": "unmatched", "status": "404"}
    assert (
        value(after, "desk_http_requests_total", **unmatched) - value(before, "desk_http_requests_total", **unmatched)
        == 1
    )
    timed = {"method": "GET", "route": route}
    assert (
        value(after, "desk_http_request_seconds_count", **timed)
        - value(before, "desk_http_request_seconds_count", **timed)
        == 2
    )
    assert not any(order.id in str(labels) for _, labels in after)  # no label per order


async def test_a_body_refused_for_its_size_is_counted_under_its_route(app, make_user, client_for):
    # refused by its Content-Length before routing, it was counted under "unmatched", as if nothing took it
    client = await client_for(await make_user())
    before = await scrape(app)
    too_large = await client.post("/api/v1/work-orders", content=b"{" + b" " * (1024 * 1024) + b"}")
    assert too_large.status_code == 413
    after = await scrape(app)

    refused = {"method": "POST", "route": "/api/v1/work-orders", "status": "413"}
    assert (
        value(after, "desk_http_requests_total", **refused) - value(before, "desk_http_requests_total", **refused) == 1
    )


async def test_outbox_depth_oldest_age_and_spend_against_its_cap(app, db, settings, make_user, make_order):
    person = await make_user()
    for _ in range(3):
        await make_order(person)
    await budget.charge(db, user_id=None, agent="triage", usd=0.25)

    samples = await scrape(app)

    assert value(samples, "desk_outbox_events", status="pending") == 3
    assert value(samples, "desk_outbox_oldest_pending_seconds") >= 0
    assert value(samples, "desk_ai_spend_usd", scope="agent:triage") == 0.25
    assert value(samples, "desk_ai_spend_usd", scope="global") == 0.25
    assert value(samples, "desk_ai_spend_cap_usd", scope="global") == settings.ai_global_daily_spend_usd
    assert ("desk_open_screens", ()) in samples
    assert value(samples, "desk_ai_provider_unreachable") == 0


async def test_an_unreachable_provider_shows_while_its_breaker_is_open(app, db, settings):
    breaker = Breaker(tuned(settings, ai_probe_interval_ms=5000))
    for _ in range(THRESHOLD):
        await breaker.failed(db, error="status 503")

    open_ = await scrape(app)
    await breaker.answered(db)
    closed = await scrape(app)

    assert value(open_, "desk_ai_provider_unreachable") == 1
    assert value(closed, "desk_ai_provider_unreachable") == 0


async def test_copilot_turns_first_token_and_provider_errors(app, make_user, client_for, provider, fake_provider):
    person = await make_user()
    client = await client_for(person)
    session = (await client.post("/api/v1/ai/sessions")).json()
    url = f"/api/v1/ai/sessions/{session['id']}/messages"
    before = await scrape(app)
    fake_provider.script(Turn.text("Three open orders.", chunks=3), Turn.error(500))

    answered = await client.post(url, json={"content": "Anything open?"})
    failed = await client.post(url, json={"content": "And now?"})
    after = await scrape(app)

    assert "event: token" in answered.text and "event: error" in failed.text
    assert value(after, "desk_copilot_turns_total") - value(before, "desk_copilot_turns_total") == 2
    first = "desk_copilot_first_token_seconds_count"
    assert value(after, first) - value(before, first) == 1  # the failed turn sent no token
    errors = "desk_copilot_stream_errors_total"
    assert value(after, errors, code="AI_UNAVAILABLE") - value(before, errors, code="AI_UNAVAILABLE") == 1


async def test_metrics_are_refused_outside_the_allowed_networks(app, settings):
    outside = httpx.ASGITransport(app, client=("203.0.113.9", 40000))
    async with httpx.AsyncClient(transport=outside, base_url="http://desk.test") as client:
        refused = await client.get("/metrics")
    use_settings(Settings(desk_metrics_allow=""))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://desk.test") as client:
        off = await client.get("/metrics")
    use_settings(Settings(desk_metrics_allow="203.0.113.0/24"))
    async with httpx.AsyncClient(transport=outside, base_url="http://desk.test") as client:
        allowed = await client.get("/metrics")

    assert refused.status_code == 403 and refused.json()["error"]["code"] == "FORBIDDEN"
    assert off.status_code == 403
    assert allowed.status_code == 200 and "desk_http_requests_total" in allowed.text
