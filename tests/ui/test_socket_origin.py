"""Issue 16.8: NiceGUI's socket.io endpoint answers pages of this desk only, not any site's."""

import logging

import httpx
import pytest
from nicegui import app
from nicegui.testing import User

HANDSHAKE = {"EIO": "4", "transport": "polling"}


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "http://desk.test.evil.example", "null", "http://evil.example:80"]
)
async def test_a_handshake_from_another_site_is_refused(user: User, caplog, origin):
    caplog.set_level(logging.CRITICAL, logger="engineio.server")  # it logs each refused origin as an error
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://desk.test") as client:
        refused = await client.get("/_nicegui_ws/socket.io/", params=HANDSHAKE, headers={"Origin": origin})

    assert refused.status_code == 400 and "not an accepted origin" in refused.text
    assert "sid" not in refused.text


@pytest.mark.parametrize("origin", ["http://desk.test", "https://desk.test", "https://desk.test:8443"])
async def test_the_desks_own_pages_still_connect(user: User, origin):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://desk.test") as client:
        opened = await client.get("/_nicegui_ws/socket.io/", params=HANDSHAKE, headers={"Origin": origin})

    assert opened.status_code == 200 and opened.text.startswith("0{") and '"sid"' in opened.text
