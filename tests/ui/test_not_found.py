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
