"""First end-to-end runs of the copilot runtime against the scripted fake provider."""

from tests.fake_provider import Turn


async def test_text_answer(copilot, fake_provider, make_user):
    sam = await make_user("user")
    fake_provider.script(Turn.text("You have no work orders yet.", chunks=3))

    events = await copilot(sam, "What do I have?")

    assert "".join(e.text for e in events if e.kind == "token") == "You have no work orders yet."
    assert events[-1].kind == "message_done" and events[-1].status == "complete"


async def test_read_then_update_approved(copilot, approve, fake_provider, make_user, make_order, db):
    sam = await make_user("user")
    order = await make_order(sam, "Leaking tap")
    fake_provider.script(
        *Turn.read_then_update(order.id, priority="urgent"),
        Turn.text("Done: it is urgent now."),
    )

    events = await copilot(sam, "Make the tap urgent", decide=approve(sam))

    staged = next(e for e in events if e.kind == "tool_approval_required")
    assert staged.diff.before["priority"] == "medium" and staged.diff.after["priority"] == "urgent"
    assert staged.diff.changed == ["priority"]
    assert events[-1].status == "complete"
    stored = await db["work_orders"].find_one({})
    assert stored["priority"] == "urgent" and stored["version"] == 2
    entry = await db["activity"].find_one({"action": "updated"})
    assert entry["runId"] == events[-1].run_id
