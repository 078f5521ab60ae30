"""An unknown /app/… address: a 404 inside the desk's frame with a way back, not NiceGUI's bare error."""

from nicegui.testing import User


async def test_an_unknown_address_shows_a_404_in_the_frame_with_a_way_back(user: User, make_user, log_in):
    sam = await make_user("user")
    await log_in(user, sam)

    response = await user.http_client.get("/app/no-such-screen/123")  # the page as the browser gets it

    assert response.status_code == 404
    page = response.text
    assert "There is no page at this address." in page and "HTTPException" not in page
    assert "Back to the work orders" in page and "Log out" in page  # a way back, inside the frame


async def test_real_screens_still_answer(user: User, make_user, make_order, log_in):
    sam = await make_user("user")
    order = await make_order(sam, "Leaking tap")
    await log_in(user, sam)
    await user.open(f"/app/work-orders/{order.id}")
    await user.should_see(marker="detail-title")
    await user.should_not_see("There is no page at this address.")


async def test_an_address_outside_the_screens_shows_the_same_404(user: User, make_user, log_in):
    sam = await make_user("user")
    await log_in(user, sam)

    for address in ("/work-orders", "/admin/users", "/no/such/thing?x=1"):  # a guess, an old bookmark, a typo
        response = await user.http_client.get(address)

        assert response.status_code == 404, address
        assert "There is no page at this address." in response.text and "HTTPException" not in response.text
        assert "Back to the work orders" in response.text and "Log out" in response.text
    api = await user.http_client.get("/api/v1/no-such-route")  # the API keeps answering in its envelope
    assert api.status_code == 404 and api.json()["error"]["code"] == "NOT_FOUND"
    assert (await user.http_client.get("/favicon.ico")).status_code == 200  # NiceGUI's own routes still answer


async def test_an_unknown_address_asks_a_stranger_to_log_in_first(user: User):
    response = await user.http_client.get("/work-orders")

    assert response.status_code == 303
    assert response.headers["location"] == "/login?redirect_to=%2Fwork-orders"
