"""Write limits per person: at most DESK_WRITES_PER_MINUTE orders, comments and edits in any 60 seconds."""

import asyncio
from datetime import timedelta

import pytest

from desk.config import use_settings
from desk.errors import RateLimited
from desk.work_orders import service
from desk.work_orders.models import CommentCreate, WorkOrderUpdate
from tests.helpers import actor

TOO_MANY = "Too many new orders, comments and edits from you in the last minute (at most {}); try again in {} second{}."


@pytest.fixture
def limit(settings):
    """The desk's default limit, 60 writes a minute (the test settings raise it for everyone else)."""
    use_settings(settings.model_copy(update={"desk_writes_per_minute": 60}))
    return 60


async def comment(client, order_id: str, text: str):
    return await client.post(f"/api/v1/work-orders/{order_id}/comments", json={"text": text})


async def test_the_sixty_first_comment_in_a_minute_is_refused_and_not_stored(
    limit, make_user, make_order, client_for, db
):
    sam = await make_user("user")
    order = await make_order(sam)  # one write of the sixty
    sams = await client_for(sam)

    posted = [(await comment(sams, order.id, f"note {n}")).status_code for n in range(limit)]

    assert posted == [201] * (limit - 1) + [429]
    refused = await comment(sams, order.id, "one too many")
    wait = int(refused.headers["Retry-After"])
    assert wait == 60  # the clock stands still: the first write leaves the window a minute from now
    error = refused.json()["error"]
    assert error["code"] == "RATE_LIMITED"  # the family the login limit answers in
    assert error["message"] == TOO_MANY.format(limit, wait, "" if wait == 1 else "s")
    assert error["details"] == {"retryAfter": wait}
    texts = {c["text"] for c in (await sams.get(f"/api/v1/work-orders/{order.id}/comments")).json()}
    assert len(texts) == limit - 1 and "one too many" not in texts and f"note {limit - 1}" not in texts


async def test_one_person_at_the_limit_holds_up_nobody_else(limit, make_user, make_order, client_for, db):
    sam, priya = await make_user("user"), await make_user("user")
    order = await make_order(sam)
    sams, priyas = await client_for(sam), await client_for(priya)
    for n in range(limit - 1):
        await comment(sams, order.id, f"note {n}")

    assert (await comment(sams, order.id, "flood")).status_code == 429
    created = await priyas.post("/api/v1/work-orders", json={"title": "Broken window"})
    assert created.status_code == 201
    assert (await comment(priyas, created.json()["id"], "on it")).status_code == 201


async def test_orders_edits_and_deletes_count_with_comments(make_user, client_for, settings):
    use_settings(settings.model_copy(update={"desk_writes_per_minute": 4}))
    sam = await make_user("user")
    sams = await client_for(sam)

    made = await sams.post("/api/v1/work-orders", json={"title": "Leaking tap"})
    order = made.json()
    edited = await sams.patch(f"/api/v1/work-orders/{order['id']}", json={"version": 1, "priority": "high"})
    commented = await comment(sams, order["id"], "Still dripping")
    deleted = await sams.delete(f"/api/v1/work-orders/{order['id']}", params={"version": 2})
    refused = await sams.post("/api/v1/work-orders", json={"title": "Another tap"})

    assert [r.status_code for r in (made, edited, commented, deleted, refused)] == [201, 200, 201, 204, 429]
    assert "at most 4" in refused.json()["error"]["message"]
    assert (await sams.get("/api/v1/work-orders")).json()["total"] == 0  # the refused order was never stored


async def test_the_window_slides_rather_than_resetting_on_the_minute(
    limit, make_user, make_order, client_for, db, clock
):
    sam = await make_user("user")
    order = await make_order(sam)  # at the top of a minute (the test's clock starts there), with nine comments
    sams = await client_for(sam)
    for n in range(9):
        await comment(sams, order.id, f"note {n}")
    clock.move(timedelta(seconds=20))
    for n in range(limit - 10):
        await comment(sams, order.id, f"later note {n}")
    assert (await comment(sams, order.id, "too soon")).status_code == 429

    # 50 s in: every write is still within the last minute; the first ten leave it in 10 s
    clock.move(timedelta(seconds=30))
    still = await comment(sams, order.id, "still too soon")
    assert still.status_code == 429 and int(still.headers["Retry-After"]) == 10

    # 60 s in, a new clock minute: only the slots of the ten writes that left the window are free
    clock.move(timedelta(seconds=10))
    freed = [(await comment(sams, order.id, f"later {n}")).status_code for n in range(11)]
    assert freed == [201] * 10 + [429]


async def test_the_services_enforce_it_so_every_way_in_obeys(limit, make_user, make_order, db):
    sam = await make_user("user")
    order = await make_order(sam)
    for n in range(limit - 1):
        await service.add_comment(db=db, actor=actor(sam), order_id=order.id, data=CommentCreate(text=f"n{n}"))

    with pytest.raises(RateLimited) as refused:
        await service.update(
            db=db, actor=actor(sam), order_id=order.id, data=WorkOrderUpdate(version=1, priority="low")
        )

    assert refused.value.retry_after >= 1
    assert (await service.get(db=db, actor=actor(sam), order_id=order.id)).priority == "medium"


async def test_writes_sent_together_cannot_all_slip_through(make_user, make_order, client_for, settings, db):
    use_settings(settings.model_copy(update={"desk_writes_per_minute": 5}))
    sam = await make_user("user")
    order = await make_order(sam)  # the first of the five
    sams = await client_for(sam)

    answers = await asyncio.gather(*(comment(sams, order.id, f"burst {n}") for n in range(12)))

    assert sorted(a.status_code for a in answers) == [201] * 4 + [429] * 8
    assert len((await sams.get(f"/api/v1/work-orders/{order.id}/comments")).json()) == 4
