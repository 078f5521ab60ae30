"""The team desk over HTTP: the queue, "assign to me", requesters, and comments (DESIGN §3a)."""

import pytest
from bson import ObjectId

from desk.errors import Forbidden
from desk.users import repository as users_repo
from desk.work_orders import changes, service
from desk.work_orders.models import CommentCreate, WorkOrderQuery
from tests.helpers import actor


async def test_a_user_files_an_unassigned_order_and_a_colleague_takes_it_from_the_queue(make_user, client_for, db):
    sam, priya = await make_user("user"), await make_user("user")
    filer, taker = await client_for(sam), await client_for(priya)

    created = await filer.post("/api/v1/work-orders", json={"title": "Broken chair", "ownerId": None})
    order = created.json()
    queue = (await taker.get("/api/v1/work-orders", params={"ownerId": "none"})).json()
    taken = await taker.patch(f"/api/v1/work-orders/{order['id']}", json={"version": 1, "ownerId": priya["id"]})
    activity = (await filer.get(f"/api/v1/work-orders/{order['id']}/activity")).json()

    assert created.status_code == 201
    assert (order["requesterId"], order["ownerId"]) == (sam["id"], None)
    assert ([o["id"] for o in queue["items"]], queue["total"]) == ([order["id"]], 1)
    assert taken.status_code == 200
    assert (taken.json()["requesterId"], taken.json()["ownerId"], taken.json()["version"]) == (
        sam["id"],
        priya["id"],
        2,
    )
    assert activity[0]["actorId"] == priya["id"]
    assert (activity[0]["before"], activity[0]["after"]) == ({"ownerId": None}, {"ownerId": priya["id"]})
    empty = (await taker.get("/api/v1/work-orders", params={"ownerId": "none"})).json()
    assert (empty["items"], empty["total"]) == ([], 0)


async def test_the_requester_is_read_only(make_user, client_for, make_order):
    sam, priya = await make_user("user"), await make_user("user")
    order = await make_order(sam)

    response = await (await client_for(sam)).patch(
        f"/api/v1/work-orders/{order.id}", json={"version": 1, "requesterId": priya["id"]}
    )

    assert response.status_code == 400
    assert order.requester_id == sam["id"]


async def test_comments_are_listed_and_added_by_anyone_who_sees_the_order(
    make_user, client_for, make_order, change_user
):
    sam, vic, lee = await make_user("user"), await make_user("user", name="Vic"), await make_user("user")
    order = await make_order(sam)
    vic = await change_user(vic, role="viewer")
    url = f"/api/v1/work-orders/{order.id}/comments"

    first = await (await client_for(sam)).post(url, json={"text": "  It drips at night. <b>Really</b>  "})
    second = await (await client_for(vic)).post(url, json={"text": "Seen it too.\nTwice."})
    hidden = await (await client_for(lee)).post(url, json={"text": "Me?"})
    listed = (await (await client_for(vic)).get(url)).json()

    assert (first.status_code, second.status_code, hidden.status_code) == (201, 201, 404)
    assert first.json()["text"] == "It drips at night. <b>Really</b>"  # stored as typed; shown as text, never HTML
    assert [(c["authorId"], c["text"]) for c in listed] == [
        (vic["id"], "Seen it too.\nTwice."),
        (sam["id"], "It drips at night. <b>Really</b>"),
    ]
    timeline = (await (await client_for(sam)).get(f"/api/v1/work-orders/{order.id}/activity")).json()
    assert [e["action"] for e in timeline] == ["commented", "commented", "created"]
    assert (await (await client_for(lee)).get(url)).status_code == 404


async def test_a_comment_is_checked_like_every_other_text(make_user, client_for, make_order, db):
    sam = await make_user("user")
    order = await make_order(sam)
    client = await client_for(sam)
    url = f"/api/v1/work-orders/{order.id}/comments"

    refused = [
        await client.post(url, json={"text": "   "}),
        await client.post(url, json={"text": "x" * 2001}),
        await client.post(url, json={"text": "bell \x07"}),
        await client.post(url, json={}),
    ]

    assert [r.status_code for r in refused] == [400, 400, 400, 400]
    assert all(r.json()["error"]["code"] == "VALIDATION_ERROR" for r in refused)
    assert (await client.post(url, json={"text": "x" * 2000})).status_code == 201
    assert await db["activity"].count_documents({"action": "commented", "workOrderId": ObjectId(order.id)}) == 1


async def test_a_comment_moves_no_version_and_reaches_the_change_feed(make_user, client_for, make_order, db):
    sam = await make_user("user")
    order = await make_order(sam)
    seq = await changes.latest(db)

    await (await client_for(sam)).post(f"/api/v1/work-orders/{order.id}/comments", json={"text": "Any news?"})

    (change,) = await changes.since(db, seq)
    assert (change["workOrderId"], change["kind"]) == (order.id, "commented")
    assert sam["id"] in change["owners"]
    assert (await db["work_orders"].find_one({}))["version"] == 1


async def test_an_admin_can_give_an_order_to_anyone_who_can_work_however_many_people_the_desk_has(db, make_user):
    boss = await make_user("admin")
    first_hired = await make_user("user")  # the oldest account: it must not fall off the end of a page
    crowd = [
        {"email": f"p{i}@example.com", "name": f"Person {i:03}", "role": "user", "active": True, "aiEnabled": True}
        for i in range(120)
    ]
    for person in crowd:  # many people, stored as they are (no password needed to be chosen)
        await users_repo.insert(db, person)

    names, assignable, _ = await service.owner_choices(db=db, actor=actor(boss))

    assert first_hired["id"] in assignable and len(assignable) == 122
    assert list(assignable.values()) == sorted(assignable.values(), key=str.casefold)  # alphabetical
    assert len(names) == 122


async def test_a_long_timeline_is_read_page_by_page_newest_first(make_user, client_for, make_order, db):
    # it stopped at its newest 200 entries: the rest, its "created" entry too, could not be read at all
    sam = await make_user("user")
    order = await make_order(sam)
    for n in range(205):
        await service.add_comment(db=db, actor=actor(sam), order_id=order.id, data=CommentCreate(text=f"note {n}"))
    client = await client_for(sam)
    timeline, comments = f"/api/v1/work-orders/{order.id}/activity", f"/api/v1/work-orders/{order.id}/comments"

    first = (await client.get(timeline)).json()
    rest = (await client.get(timeline, params={"offset": 200})).json()
    some = (await client.get(timeline, params={"offset": 3, "limit": 2})).json()
    older_comments = (await client.get(comments, params={"offset": 200})).json()
    too_many = await client.get(timeline, params={"limit": 201})

    assert len(first) == 200 and first[0]["text"] == "note 204"
    assert [e.get("text") for e in rest] == ["note 4", "note 3", "note 2", "note 1", "note 0", None]
    assert rest[-1]["action"] == "created"
    assert [e["text"] for e in some] == ["note 201", "note 200"]
    assert [c["text"] for c in older_comments] == ["note 4", "note 3", "note 2", "note 1", "note 0"]
    assert too_many.status_code == 400
    assert too_many.json()["error"]["details"]["fields"][0]["field"] == "limit"


async def test_the_list_filters_by_who_asked_people_by_themselves_admins_by_anyone(
    make_user, client_for, make_order, change_user
):
    sam, priya, lee, admin = [await make_user(role) for role in ("user", "user", "user", "admin")]
    vic = await change_user(await make_user("user"), role="viewer")
    sams, admins = await client_for(sam), await client_for(admin)
    await make_order(sam, "Sam's own tap")
    await make_order(sam, "Sam's queued tap", ownerId=None)
    handed = await make_order(sam, "Sam's tap for Lee")
    given = await admins.patch(f"/api/v1/work-orders/{handed.id}", json={"version": 1, "ownerId": lee["id"]})
    await make_order(admin, "Tap given to Sam", ownerId=sam["id"])
    await make_order(priya, "Priya's own tap")
    priyas_queued = await make_order(priya, "Priya's queued tap", ownerId=None)
    mine = {"Sam's own tap", "Sam's queued tap", "Sam's tap for Lee"}

    own = (await sams.get("/api/v1/work-orders", params={"requesterId": sam["id"].upper()})).json()
    own_searched = (await sams.get("/api/v1/work-orders", params={"requesterId": sam["id"], "q": "tap"})).json()
    someone_elses = await sams.get("/api/v1/work-orders", params={"requesterId": priya["id"]})
    priyas = (await admins.get("/api/v1/work-orders", params={"requesterId": priya["id"], "sort": "title"})).json()
    by_viewer = (await (await client_for(vic)).get("/api/v1/work-orders", params={"requesterId": sam["id"]})).json()
    queued = {"requesterId": priya["id"], "ownerId": "none"}
    both = (await admins.get("/api/v1/work-orders", params=queued)).json()
    both_searched = (await admins.get("/api/v1/work-orders", params=queued | {"q": "tap"})).json()
    malformed = await admins.get("/api/v1/work-orders", params={"requesterId": "sam"})

    assert given.status_code == 200 and given.json()["ownerId"] == lee["id"]  # asked of someone else
    assert ({o["title"] for o in own["items"]}, own["total"], own["totalExact"]) == (mine, 3, True)
    assert ({o["title"] for o in own_searched["items"]}, own_searched["total"]) == (mine, 3)
    assert someone_elses.status_code == 403
    assert someone_elses.json()["error"]["message"] == "You can filter only by what you asked for yourself."
    assert ([o["title"] for o in priyas["items"]], priyas["total"]) == (["Priya's own tap", "Priya's queued tap"], 2)
    assert {o["title"] for o in by_viewer["items"]} == mine
    assert [o["id"] for o in both["items"]] == [priyas_queued.id]
    assert ([o["id"] for o in both_searched["items"]], both_searched["total"]) == ([priyas_queued.id], 1)
    assert (malformed.status_code, malformed.json()["error"]["code"]) == (400, "VALIDATION_ERROR")


async def test_the_copilots_own_list_takes_no_one_elses_requests(make_user, db):
    admin, sam = await make_user("admin"), await make_user("user")
    others = WorkOrderQuery(requesterId=sam["id"])

    with pytest.raises(Forbidden):
        await service.list_orders(db=db, actor=actor(admin), query=others, mine=True)


async def test_people_name_themselves_as_owner_in_capitals_too(make_user, client_for, make_order):
    sam = await make_user("user")
    await make_order(sam, "Sam's own")

    listed = await (await client_for(sam)).get("/api/v1/work-orders", params={"ownerId": sam["id"].upper()})

    assert listed.status_code == 200
    assert [o["title"] for o in listed.json()["items"]] == ["Sam's own"]
