"""Every answer carries the security headers; HSTS only behind https; a header the app set itself is kept."""

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from desk.security_headers import SecurityHeaders


def _app(*, https: bool) -> SecurityHeaders:
    async def page(_):
        return PlainTextResponse("hi")

    async def own(_):
        return PlainTextResponse("hi", headers={"Referrer-Policy": "no-referrer"})

    return SecurityHeaders(Starlette(routes=[Route("/", page), Route("/own", own)]), https=https)


@pytest.mark.parametrize("https", [False, True])
async def test_every_answer_forbids_framing_sniffing_and_foreign_sources(https):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(_app(https=https)), base_url="http://desk.test") as c:
        headers = (await c.get("/")).headers
        own = (await c.get("/own")).headers

    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert "default-src 'self'" in headers["content-security-policy"]
    assert "object-src 'none'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin" and own.get_list("referrer-policy") == ["no-referrer"]
    assert ("strict-transport-security" in headers) is https
