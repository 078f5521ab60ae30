"""The change feed as open screens read it: every change handed out once, in order, the late ones too."""

from datetime import UTC, datetime

from desk.work_orders import changes


async def _took(db, n: int) -> None:
    """Writers have taken the numbers up to `n` (their entries may not be written yet)."""
    await db["counters"].update_one({"_id": "changes:seq"}, {"$max": {"n": n}}, upsert=True)


async def _wrote(db, seq: int) -> None:
    entry = {"seq": seq, "workOrderId": f"order-{seq}", "kind": "commented", "owners": [], "at": datetime.now(UTC)}
    await db["changes"].insert_one(entry)


async def _read(cursor: changes.Cursor, db, clock: float = 0.0) -> list[int]:
    return [change["seq"] for change in await cursor.read(db, clock=clock)]


async def test_a_change_whose_entry_lands_after_a_later_one_is_still_handed_out(db):
    # two writers took 1 and 2, and the second wrote its entry first: reading on from 2 would lose 1 for good
    cursor = changes.Cursor(await changes.latest(db))
    await _took(db, 2)
    await _wrote(db, 2)
    assert await _read(cursor, db) == [2]

    await _wrote(db, 1)
    assert await _read(cursor, db) == [1]  # late, and once
    assert await _read(cursor, db) == []  # nothing twice
    await changes.record(db, None, "created", set())
    assert await _read(cursor, db) == [3]


async def test_a_number_never_written_is_stepped_over_after_a_while(db):
    # a writer that died between its number and its entry must not hold the feed back forever
    cursor = changes.Cursor(await changes.latest(db))
    await _took(db, 2)
    await _wrote(db, 2)
    assert await _read(cursor, db, clock=0.0) == [2]
    assert await _read(cursor, db, clock=changes.GAP_SECONDS / 2) == []
    assert cursor.seq == 0  # still waiting for 1

    assert await _read(cursor, db, clock=changes.GAP_SECONDS + 1) == []
    assert cursor.seq == 2 and not cursor.ahead  # stepped over 1: reads go on from 2
    await changes.record(db, None, "created", set())
    assert await _read(cursor, db, clock=changes.GAP_SECONDS + 2) == [3]


async def test_changes_past_a_gap_are_handed_out_however_many_wait_behind_it(db):
    # found by a review: with 500 changes handed out past a gap, each read fetched those 500 again (its limit)
    # and nothing newer reached any screen until the gap closed
    cursor = changes.Cursor(await changes.latest(db))
    await _took(db, 502)
    entries = [
        {"seq": n, "workOrderId": "", "kind": "created", "owners": [], "at": datetime.now(UTC)} for n in range(2, 502)
    ]
    await db["changes"].insert_many(entries)
    assert len(await _read(cursor, db)) == 500  # 2 to 501; 1 is missing

    await _wrote(db, 502)
    assert await _read(cursor, db) == [502]
