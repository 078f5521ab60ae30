"""What a work-order write accepts: text without control characters, no nulls, something to change."""

import pytest
from bson import ObjectId

ORDERS = "/api/v1/work-orders"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": "a\u0000b"}, "title"),
        ({"title": "Leaking\u0007 tap"}, "title"),
        ({"title": "Leaking\ntap"}, "title"),  # a title is one line
        ({"title": "Leaking\ttap"}, "title"),
        ({"title": "Leaking\r\ntap"}, "title"),
        ({"title": "Leaking \u0085tap"}, "title"),  # C1: NEXT LINE
        ({"title": "Leaking\u2028tap"}, "title"),  # LINE SEPARATOR: a line break to whatever shows it
        ({"title": "Leaking\u2029tap"}, "title"),  # PARAGRAPH SEPARATOR
        ({"title": "Leaking tap\u007f!"}, "title"),
        ({"title": "Leaking tap", "description": "Drips \u001b[31mall\u001b[0m night"}, "description"),
        ({"title": "Leaking tap", "description": "Drips\u0000"}, "description"),
        ({"title": "Leaking tap", "description": "Drips \u009b all night"}, "description"),
    ],
)
async def test_control_characters_are_refused_naming_the_field(body, field, make_user, client_for, db):
    client = await client_for(await make_user("user"))

    response = await client.post(ORDERS, json=body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert [problem["field"] for problem in error["details"]["fields"]] == [field]
    assert "control character" in error["message"]
    assert await db["work_orders"].count_documents({}) == 0


async def test_a_tab_or_a_line_break_is_named_not_only_numbered(make_user, client_for):
    # pasted from a spreadsheet, a title's tab looks like a space: "U+0009" alone told a person nothing
    client = await client_for(await make_user("user"))

    tab = await client.post(ORDERS, json={"title": "Leaking\ttap"})
    line_break = await client.post(ORDERS, json={"title": "Leaking\rtap"})

    assert tab.json()["error"]["details"]["fields"][0]["message"] == (
        "must not contain a control character (found a tab, U+0009)"
    )
    assert line_break.json()["error"]["details"]["fields"][0]["message"] == (
        "must not contain a control character (found a line break, U+000D)"
    )


async def test_an_edit_with_a_control_character_writes_nothing(make_user, client_for, make_order, db):
    sam = await make_user("user")
    order = await make_order(sam, "Leaking tap")

    response = await (await client_for(sam)).patch(f"{ORDERS}/{order.id}", json={"version": 1, "title": "Leak\u0000"})

    assert response.status_code == 400
    assert [problem["field"] for problem in response.json()["error"]["details"]["fields"]] == ["title"]
    stored = await db["work_orders"].find_one({"_id": ObjectId(order.id)})
    assert (stored["title"], stored["version"]) == ("Leaking tap", 1)


async def test_a_description_keeps_its_lines_and_tabs_with_line_breaks_stored_as_newlines(make_user, client_for):
    client = await client_for(await make_user("user"))
    description = "Steps:\r\n\t1. Open the tap\r\n\t2. Watch it drip\rÉclair 🍰 café"

    response = await client.post(ORDERS, json={"title": "Tap drips — café ☕", "description": description})

    assert response.status_code == 201
    assert response.json()["description"] == "Steps:\n\t1. Open the tap\n\t2. Watch it drip\nÉclair 🍰 café"
    assert response.json()["title"] == "Tap drips — café ☕"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"title": "x" * 200, "description": "y" * 5000}, 201),
        ({"title": "x" * 201}, 400),
        ({"title": "x", "description": "y" * 5001}, 400),
        ({"title": "   "}, 400),
    ],
)
async def test_length_limits_stay_as_they_were(body, expected, make_user, client_for):
    client = await client_for(await make_user("user"))

    assert (await client.post(ORDERS, json=body)).status_code == expected


@pytest.mark.parametrize("field", ["title", "description", "priority", "status"])  # ownerId null: the queue
async def test_null_for_a_field_is_refused_naming_it(field, make_user, client_for, make_order, db):
    admin = await make_user("admin")
    order = await make_order(admin, "Leaking tap")

    response = await (await client_for(admin)).patch(f"{ORDERS}/{order.id}", json={"version": 1, field: None})

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert [problem["field"] for problem in error["details"]["fields"]] == [field]
    assert (await db["work_orders"].find_one({}))["version"] == 1
    assert await db["activity"].count_documents({}) == 1


async def test_an_edit_with_nothing_to_change_is_refused_and_writes_nothing(make_user, client_for, make_order, db):
    sam = await make_user("user")
    order = await make_order(sam, "Leaking tap")

    response = await (await client_for(sam)).patch(f"{ORDERS}/{order.id}", json={"version": 1})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert response.json()["error"]["message"] == "Nothing to change."
    assert (await db["work_orders"].find_one({}))["version"] == 1
    assert await db["activity"].count_documents({}) == 1
