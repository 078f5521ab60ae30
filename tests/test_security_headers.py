"""Every answer carries the security headers; HSTS only behind https; a header the app set itself is kept.

The browser test that an injected `onmouseover=` stays inert under this policy is tests/e2e/test_hostile_text.py.
"""

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


async def test_no_inline_event_handler_attribute_may_run_and_scripts_come_only_from_the_desk():
    async with httpx.AsyncClient(transport=httpx.ASGITransport(_app(https=False)), base_url="http://desk.test") as c:
        policy = _directives((await c.get("/")).headers["content-security-policy"])

    # an attribute that got into the page (`onmouseover=`, `onerror=`) is inert, whatever script-src allows
    assert policy["script-src-attr"] == ["'none'"]
    # script elements: the desk's own files and NiceGUI's inline bootstrap; no other origin, no wildcard
    assert policy["script-src"][0] == "'self'" and set(policy["script-src"][1:]) == {"'unsafe-inline'", "'unsafe-eval'"}
    assert policy["connect-src"] == ["'self'"] and policy["base-uri"] == ["'self'"]
    assert policy["form-action"] == ["'self'"]


def _directives(header: str) -> dict[str, list[str]]:
    directives = [part.split() for part in header.split(";") if part.strip()]
    return {name: values for name, *values in directives}
