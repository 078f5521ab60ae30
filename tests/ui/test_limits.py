"""What a person sees of the limits: the write limit's message where they wrote, a lock in the audit log in words."""

from nicegui.testing import User

from desk.config import use_settings
from tests.helpers import error_of, lock_out, until


async def test_a_comment_past_the_write_limit_shows_the_services_message(user: User, open_sams_order, settings, db):
    use_settings(settings.model_copy(update={"desk_writes_per_minute": 3}))
    await open_sams_order("Broken chair", comments=["note 0", "note 1"])

    user.find(marker="comment-text").type("It wobbles")
    user.find(marker="comment-add").click()

    shown = "Too many new orders, comments and edits from you in the last minute (at most 3); try again in"
    await until(lambda: (error_of(user, "comment-text") or "").startswith(shown), what="the limit's message")
    assert user.find(marker="comment-text").elements.pop().value == "It wobbles"  # kept, to post a little later
    assert await db["activity"].count_documents({"action": "commented"}) == 2


async def test_the_audit_log_says_in_words_that_the_desk_locked_an_account(user: User, make_user, log_in, db):
    admin = await make_user("admin", name="Dana Admin")
    await make_user("user", name="Sam Rivera", email="sam@example.com")
    await lock_out(db, "sam@example.com")
    await log_in(user, admin)

    await user.open("/app/admin/audit")

    await user.should_see("Account locked")
    await user.should_see("by the desk")
    await user.should_see("Sam Rivera: 50 failed logins from 50 addresses within an hour, until", retries=20)
