"""Lists for views that stay put: several statuses at once (the "Open" view), totals to match."""


async def test_status_may_repeat_and_the_total_counts_every_status_named(make_user, client_for, make_order):
    sam = await make_user("user")
    client = await client_for(sam)
    started, finished = await make_order(sam, "Started"), await make_order(sam, "Finished")
    await make_order(sam, "Waiting")
    await client.patch(f"/api/v1/work-orders/{started.id}", json={"version": 1, "status": "in_progress"})
    await client.patch(f"/api/v1/work-orders/{finished.id}", json={"version": 1, "status": "done"})

    open_ = (await client.get("/api/v1/work-orders", params=[("status", "pending"), ("status", "in_progress")])).json()
    assert sorted(o["title"] for o in open_["items"]) == ["Started", "Waiting"] and open_["total"] == 2
    searched = await client.get("/api/v1/work-orders", params=[("q", "fin"), ("status", "done"), ("status", "pending")])
    assert [o["title"] for o in searched.json()["items"]] == ["Finished"] and searched.json()["total"] == 1
    one = (await client.get("/api/v1/work-orders", params={"status": "done"})).json()
    assert [o["title"] for o in one["items"]] == ["Finished"] and one["total"] == 1
    wrong = await client.get("/api/v1/work-orders", params=[("status", "pending"), ("status", "open")])
    assert wrong.status_code == 400
