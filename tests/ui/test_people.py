"""The admin's people page: sorted by name, found by name or email, name and email edited, last login shown."""

from nicegui.testing import User


def names(user: User) -> list[str]:
    return [label.text for label in sorted(user.find(marker="user-name").elements, key=lambda e: e.id)]


async def test_people_sorted_by_name_found_by_name_or_email_with_last_login(user: User, make_user, log_in):
    admin = await make_user("admin", name="Dana Admin")
    await make_user("user", name="Sam Rivera", email="sam@example.com")
    await make_user("user", name="Lee Chen", email="lee@plumbers.example")
    await log_in(user, admin)
    await user.open("/app/admin/users")
    await user.should_see("3 people")
    assert names(user) == ["Dana Admin", "Lee Chen", "Sam Rivera"]  # rows are made top to bottom
    assert {label.text for label in user.find(marker="last-login").elements} == {"Never", "just now"}

    user.find(marker="user-search").type("PLUMB")
    await user.should_see("1 person")
    assert names(user) == ["Lee Chen"]
    user.find(marker="user-search").clear().type("nobody-at-all")
    await user.should_see("Nobody's name or email contains that.")
    await user.should_not_see("Last login")  # no headings over no one


async def test_an_admin_edits_a_name_and_an_email_which_must_be_free(user: User, make_user, log_in, db):
    admin = await make_user("admin", name="Dana Admin")
    sam = await make_user("user", name="Sam Rivera", email="sam@example.com")
    await make_user("user", email="taken@example.com")
    await log_in(user, admin)
    await user.open("/app/admin/users")
    await user.should_see("Sam Rivera")

    with user.scope(marker="user:sam@example.com"):
        user.find(marker="edit-person").click()
    await user.should_see(marker="edit-dialog")
    user.find(marker="edit-person-email").clear().type("Taken@Example.com")
    user.find(marker="edit-person-save").click()
    await user.should_see("Someone else has that email.")

    user.find(marker="edit-person-name").clear().type("Samuel Rivera")
    user.find(marker="edit-person-email").clear().type("Samuel@Example.com").trigger("keydown.enter")  # as Save
    await user.should_see("Saved Samuel Rivera (samuel@example.com).")
    stored = await db["users"].find_one({"email": "samuel@example.com"})
    assert stored["name"] == "Samuel Rivera" and str(stored["_id"]) == sam["id"]
