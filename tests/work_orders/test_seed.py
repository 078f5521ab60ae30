"""The demo desk is a team's: a queue, requesters apart from owners, a viewer who reads everything, comments."""

from bson import ObjectId

from desk.seed import seed_demo
from desk.work_orders import service
from desk.work_orders.models import WorkOrderQuery
from tests.helpers import actor


async def test_the_demo_has_a_queue_a_viewer_who_sees_all_and_comments(db):
    await seed_demo(db)

    vic = await db["users"].find_one({"email": "vic.moreau@example.com"})
    orders = await db["work_orders"].find({}).to_list()
    queued = [o for o in orders if o["ownerId"] is None]
    assert queued and all(o["status"] == "pending" for o in queued)
    assert not [o for o in orders if o["ownerId"] == vic["_id"] or o["requesterId"] == vic["_id"]]
    assert any(o["ownerId"] and o["ownerId"] != o["requesterId"] for o in orders)
    viewer = actor({"id": str(vic["_id"]), "role": "viewer"})
    page = await service.list_orders(db=db, actor=viewer, query=WorkOrderQuery())
    assert page.total == 200
    queue = await service.list_orders(db=db, actor=viewer, query=WorkOrderQuery(ownerId="none"))
    assert queue.total == len(queued)
    assert await db["activity"].count_documents({"action": "created"}) == 200
    comments = await db["activity"].find({"action": "commented"}).to_list()
    assert len(comments) > 20 and all(isinstance(c["workOrderId"], ObjectId) for c in comments)
