"""The copilot drawer: streamed answers, approvals (approve, reject, dismiss, expiry, stale), stop, off states."""

from datetime import timedelta

import pytest
from bson import ObjectId
from nicegui import ElementFilter, ui
from nicegui.events import GenericEventArguments
from nicegui.testing import User
from nicegui.testing.user_notify import UserNotify

from components import frame
from desk.agent.copilot import staging
from desk.agent.core import switch
from desk.agent.core.store import agent_runs, copilot_sessions
from desk.agent.triage import service as agents
from desk.config import Settings, use_settings
from desk.errors import AiTurnedOff
from desk.schema import now
from desk.work_orders import service
from desk.work_orders.models import WorkOrderRead, WorkOrderUpdate
from tests.fake_provider import Turn
from tests.helpers import actor, until
from tests.ui.conftest import WAIT


@pytest.fixture
async def ai_on(ai_settings, provider):
    return ai_settings


async def open_copilot(user: User, person: dict, log_in) -> None:
    await log_in(user, person)
    user.find(marker="copilot-toggle").click()


@pytest.fixture
def open_the_copilot_by_sams_tap(user: User, fake_provider, make_user, make_order, log_in):
    """Sam opens the copilot with one order of his, the leaking tap. Asked, the model looks it up and proposes
    making it urgent; `answer` is what it says once the change is decided. Gives Sam and the tap."""

    async def open_it(*, answer: str) -> tuple[dict, WorkOrderRead]:
        sam = await make_user("user")
        tap = await make_order(sam, "Leaking tap")
        fake_provider.script(*Turn.read_then_update(tap.id, priority="urgent"), Turn.text(answer))
        await open_copilot(user, sam, log_in)
        return sam, tap

    return open_it


def ask(user: User, text: str) -> None:
    user.find(marker="copilot-input").clear().type(text)
    user.find(marker="copilot-send").click()


async def test_a_viewers_assistant_offers_no_changes_they_could_not_approve(user: User, ai_on, make_user, log_in):
    # found by a UI QA pass: a viewer was invited to have it create, change or delete orders
    vic = await make_user("viewer")
    await open_copilot(user, vic, log_in)
    await user.should_see(marker="copilot-hint", retries=WAIT)  # the conversation loads once the drawer opens

    (hint,) = user.find(marker="copilot-hint").elements
    assert "it changes nothing" in hint.text and "delete" not in hint.text


async def test_a_new_conversation_started_in_another_tab_replaces_the_old_one_in_this_tab(
    user: User, create_user, ai_on, fake_provider, make_user, log_in
):
    # found by a UI QA pass: the first tab kept showing the archived conversation, and its next question
    # went into the new one unseen
    sam = await make_user("user")
    fake_provider.script(Turn.text("Nothing is open."), Turn.text("Two are open now."))
    await open_copilot(user, sam, log_in)
    ask(user, "Anything open?")
    await user.should_see("Nothing is open.", retries=WAIT)
    (send,) = user.find(marker="copilot-send").elements
    await until(lambda: send.enabled, what="the turn over (a new conversation waits for it)")
    second_tab = create_user()
    await log_in(second_tab, sam, landing="/app/copilot")
    await second_tab.should_see("Nothing is open.", retries=WAIT)

    second_tab.find(marker="copilot-new").click()

    await second_tab.should_see(marker="copilot-hint", retries=WAIT)
    await user.should_see(marker="copilot-hint", retries=WAIT)
    await user.should_not_see("Nothing is open.")
    ask(user, "And now?")
    await user.should_see("Two are open now.", retries=WAIT)
    await user.should_not_see("Anything open?")


async def test_a_new_conversation_says_what_the_assistant_is_for_until_it_begins(
    user: User, ai_on, fake_provider, make_user, log_in
):
    sam = await make_user("user")
    fake_provider.script(Turn.text("Nothing is open."))
    await open_copilot(user, sam, log_in)
    await user.should_see(marker="copilot-hint")

    ask(user, "Anything open?")

    await user.should_see("Nothing is open.", retries=WAIT)
    await user.should_not_see(marker="copilot-hint")


async def test_a_streamed_answer_rendered_as_escaped_markdown(user: User, ai_on, fake_provider, make_user, log_in):
    sam = await make_user("user")
    fake_provider.script(
        Turn.text(
            "You have **2** orders, *soon* 3 <img src=x onerror=alert(1)> [site](https://evil.example)"
            " (create_work_order and list_my_work_orders)"
        )
    )
    await open_copilot(user, sam, log_in)

    ask(user, "How many orders do I have?")

    await user.should_see(marker="copilot-answer", retries=WAIT)
    answer = user.find(marker="copilot-answer").elements.pop()
    html = answer.props["innerHTML"]
    assert "<strong>2</strong>" in html and "<em>soon</em>" in html
    assert "create_work_order and list_my_work_orders" in html  # a name's underscores are no emphasis
    assert "<img" not in html and "&lt;img src=x" in html
    assert "href" not in html and "evil.example" not in html and "site" in html


async def test_the_drawer_closes_with_its_own_button_and_the_assistant_page_has_none(
    user: User, ai_on, make_user, log_in
):
    sam = await make_user("user")
    await open_copilot(user, sam, log_in)
    with user:
        (drawer,) = ElementFilter(kind=ui.right_drawer)
    await until(lambda: drawer.value, what="the drawer to open")

    user.find(marker="copilot-close").click()

    await until(lambda: not drawer.value, what="the drawer to close")
    await user.open("/app/copilot")  # the page's panel is not a drawer: nothing to close
    await user.should_see(marker="copilot")
    await user.should_not_see(marker="copilot-close")


async def test_an_earlier_answer_reads_the_same_after_a_reload(user: User, ai_on, fake_provider, make_user, log_in):
    sam = await make_user("user")
    fake_provider.script(Turn.text("Fish & chips for 2 < 3 people <b>now</b>"))
    await open_copilot(user, sam, log_in)
    ask(user, "Lunch?")
    await user.should_see(marker="copilot-answer", retries=WAIT)
    streamed = user.find(marker="copilot-answer").elements.pop().props["innerHTML"]

    await user.open("/app")  # the drawer on a new page reads the conversation from the server
    user.find(marker="copilot-toggle").click()

    await user.should_see(marker="copilot-answer", retries=WAIT)
    reread = user.find(marker="copilot-answer").elements.pop().props["innerHTML"]
    assert reread == streamed and "&amp;amp;" not in reread and "&lt;b&gt;now" in reread  # escaped once, not twice


async def test_approve_a_change_and_see_it_everywhere(user: User, ai_on, db, open_the_copilot_by_sams_tap):
    _, order = await open_the_copilot_by_sams_tap(answer="It is urgent now.")

    ask(user, "Make the leaking tap urgent")

    await user.should_see(marker="approval", retries=WAIT)
    await user.should_see("Change this work order?")
    await user.should_see(marker="diff-changed")
    with user.scope(marker="diff"):
        await user.should_see("Medium")
        await user.should_see("Urgent")
    await user.should_see("Looked up 1 of your work orders")
    user.find(marker="approve").click()
    await user.should_see("It is urgent now.", retries=WAIT)
    stored = await db["work_orders"].find_one({"_id": ObjectId(order.id)})
    assert (stored["priority"], stored["version"]) == ("urgent", 2)
    await user.should_see("Urgent", retries=WAIT)  # the list behind the drawer follows live


def transcript(user: User) -> list[str]:
    """The drawer's conversation as the person reads it, top to bottom."""
    with user:
        (log,) = ElementFilter(marker="copilot-log")
    return [getattr(item, "content", None) or item.text for item in log.default_slot.children]


async def test_reject_with_a_reason_the_model_revises_and_a_reload_reads_the_same(
    user: User, ai_on, fake_provider, make_user, make_order, log_in, db
):
    sam = await make_user("user")
    order = await make_order(sam, "Leaking tap")
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", {})),
        Turn.tool_calls(("delete_work_order", {"id": order.id})),
        Turn.text("Understood, I kept it."),
    )
    await open_copilot(user, sam, log_in)
    ask(user, "Clean up my orders")
    await user.should_see("Delete this work order?", retries=WAIT)

    user.find(marker="reject-reason").type("Still leaking, keep it")
    user.find(marker="reject").click()

    await user.should_see("Understood, I kept it.", retries=WAIT)
    assert await db["work_orders"].count_documents({}) == 1
    tool_message = fake_provider.requests[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and "Still leaking, keep it" in tool_message["content"]
    streamed = transcript(user)
    assert streamed == [
        "Clean up my orders",
        "Looked up 1 of your work orders",
        "You rejected the change",
        "Understood, I kept it.",
    ]

    await user.open("/app")  # the drawer on a new page reads the conversation from the server: the same lines
    user.find(marker="copilot-toggle").click()
    await user.should_see("Understood, I kept it.", retries=WAIT)
    assert transcript(user) == streamed


def approval_open(user: User) -> bool:
    with user:
        return any(
            dialog.value
            for dialog in ElementFilter(kind=ui.dialog)
            if ElementFilter(marker="approval").within(instance=dialog)
        )


async def test_dismiss_then_reopen_from_the_chip_or_by_asking_again(
    user: User, ai_on, fake_provider, make_user, log_in, db
):
    sam = await make_user("user")
    fake_provider.script(Turn.tool_calls(("create_work_order", {"title": "Order new chairs"})), Turn.text("Created."))
    await open_copilot(user, sam, log_in)
    ask(user, "Order chairs")
    await user.should_see("Create this work order?", retries=WAIT)

    user.find(marker="approval-dismiss").click()
    await user.should_see(marker="approval-chip")
    assert await db["work_orders"].count_documents({}) == 0
    user.find(marker="approval-chip").click()
    user.find(marker="approval-dismiss").click()
    assert not approval_open(user)
    user.find(marker="copilot-input").type("And a desk?").trigger("keydown.enter.prevent")  # Enter: the button is off
    await user.should_see("The assistant is waiting for you to approve or reject its change first.")
    assert approval_open(user)  # the change is put before them again
    user.find(marker="approve").click()

    await user.should_see("Created.", retries=WAIT)
    assert (await db["work_orders"].find_one({}))["title"] == "Order new chairs"


async def test_an_expired_approval_says_so(
    user: User, fake_provider, provider, make_user, log_in, db, ai_settings, clock, monkeypatch
):
    monkeypatch.setattr(staging, "WAKE_SECONDS", 0.01)  # the waiting run sees the moved clock at once (speed only)
    sam = await make_user("user")
    fake_provider.script(Turn.tool_calls(("create_work_order", {"title": "Order new chairs"})))
    await open_copilot(user, sam, log_in)
    ask(user, "Order chairs")
    await user.should_see(marker="approval", retries=WAIT)
    clock.move(timedelta(milliseconds=ai_settings.ai_approval_ttl_ms))  # nobody decided in time

    await user.should_see("The approval expired, so nothing was changed.", retries=WAIT)
    assert await db["work_orders"].count_documents({}) == 0


async def test_a_stale_version_shows_the_fresh_diff(user: User, ai_on, db, open_the_copilot_by_sams_tap):
    sam, order = await open_the_copilot_by_sams_tap(answer="Done.")
    ask(user, "Make it urgent")
    await user.should_see(marker="approval", retries=WAIT)

    await service.update(
        db=db, actor=actor(sam), order_id=order.id, data=WorkOrderUpdate(version=1, title="Tap, kitchen")
    )
    user.find(marker="approve").click()

    await restaged(user, "Tap, kitchen")  # the fresh diff, in a new dialog
    assert (await db["work_orders"].find_one({}))["priority"] == "medium"
    user.find(marker="approve").click()
    await user.should_see("Done.", retries=WAIT)
    stored = await db["work_orders"].find_one({})
    assert (stored["title"], stored["priority"], stored["version"]) == ("Tap, kitchen", "urgent", 3)


async def test_stop_mid_stream(user: User, ai_on, fake_provider, make_user, log_in, db):
    sam = await make_user("user")
    fake_provider.script(Turn.slow("Let me think about all of your orders one by one", delay=0.4, chunks=20))
    await open_copilot(user, sam, log_in)
    ask(user, "Summarise everything")
    await user.should_see(marker="copilot-answer", retries=WAIT)

    user.find(marker="copilot-stop").click()

    await user.should_see("Stopped. Nothing pending was carried out.", retries=WAIT)
    assert await fake_provider.wait_for_disconnect()
    run = await db["agent_runs"].find_one({})
    assert run["status"] == "aborted"

    await user.open("/app")  # a page drawn later tells how the turn ended (an answer cut short is not kept)
    user.find(marker="copilot-toggle").click()
    await user.should_see("Stopped. Nothing pending was carried out.", retries=WAIT)
    assert transcript(user) == ["Summarise everything", "Stopped. Nothing pending was carried out."]


async def test_budget_exceeded_reads_as_a_plain_sentence(
    user: User, fake_provider, provider, make_user, log_in, ai_settings
):
    use_settings(Settings(**{**ai_settings.model_dump(), "ai_daily_spend_usd": 0.0}))
    sam = await make_user("user")
    await open_copilot(user, sam, log_in)
    ask(user, "Hello")
    await user.should_see(
        "Today's AI budget (your daily limit) is used up. It resets at midnight UTC; the desk works as usual.",
        retries=WAIT,
    )


async def test_viewers_can_ask_but_are_never_offered_a_write(user: User, ai_on, fake_provider, make_user, log_in, db):
    viewer = await make_user("viewer")
    fake_provider.script(Turn.tool_calls(("create_work_order", {"title": "Sneaky"})), Turn.text("I can't do that."))
    await open_copilot(user, viewer, log_in)
    ask(user, "Create an order")

    await user.should_see("I can't do that.", retries=WAIT)
    await user.should_not_see(marker="approval")
    assert await db["work_orders"].count_documents({}) == 0
    offered = {tool["function"]["name"] for tool in fake_provider.requests[0]["tools"]}
    assert offered == {"list_my_work_orders", "search_my_work_orders", "get_profile", "list_work_orders"}  # reads only


def press_ctrl_k(user: User) -> None:
    """Ctrl+K as the browser reports it to each of the page's keyboard listeners."""
    args = {"action": "keydown", "repeat": False, "altKey": False, "ctrlKey": True, "metaKey": False}
    args |= {"shiftKey": False, "key": "k", "code": "KeyK", "location": 0}
    for keyboard in [e for e in user.client.elements.values() if isinstance(e, ui.keyboard)]:
        keyboard._handle_key(GenericEventArguments(sender=keyboard, client=user.client, args=args))


async def test_ai_off_for_the_desk_or_the_person(user: User, make_user, log_in, create_user, ai_settings, db):
    use_settings(Settings(**{**ai_settings.model_dump(), "ai_enabled": False}))
    sam = await make_user("user")
    await log_in(user, sam)
    await user.should_see(marker="copilot-off")  # a dimmed icon, not a sentence taking the header's room
    (off,) = user.find(marker="copilot-off").elements
    assert (
        off.props["aria-label"]
        == "Assistant unavailable: AI is turned off on this desk: neither the assistant nor the triage agent runs."
    )
    await user.should_not_see(marker="copilot-toggle")
    press_ctrl_k(user)  # not a dead key: it says why
    await user.should_see(
        "AI is turned off on this desk: neither the assistant nor the triage agent runs.", kind=UserNotify, retries=WAIT
    )

    use_settings(ai_settings)
    priya = await make_user("user")
    await db["users"].update_one({"_id": ObjectId(priya["id"])}, {"$set": {"aiEnabled": False}})
    other = create_user()
    await log_in(other, priya)
    await other.should_see(marker="copilot-off")
    other.find(marker="copilot-off").click()
    await other.should_see("AI assistance is off for you. You can turn it on in your profile.", retries=WAIT)
    await other.should_not_see(marker="copilot-toggle")


async def test_ai_turned_off_by_an_admin_says_so_and_on_again_brings_the_assistant_back(
    user: User, ai_on, make_user, log_in, db
):
    sam, dana = await make_user("user"), await make_user("admin")
    await agents.set_ai(db=db, actor=actor(dana), on=False)

    await log_in(user, sam, landing="/login?redirect_to=/app/copilot")
    await user.should_see(marker="copilot-page-off", retries=WAIT)
    await user.should_see(AiTurnedOff.default_message)
    await user.should_not_see(marker="copilot-page-profile")  # nothing of Sam's to turn on
    await user.should_see(marker="copilot-off")  # the header's dimmed icon says the same

    await agents.set_ai(db=db, actor=actor(dana), on=True)
    await user.open("/app/copilot")
    await user.should_see(marker="copilot-input")


async def test_ai_turned_off_in_another_process_reads_as_such_in_the_assistant(
    user: User, ai_on, make_user, log_in, db, monkeypatch
):
    """This process has not read the switch since another one turned it off: the panel is drawn, and says why."""
    monkeypatch.setattr(switch, "FRESH_SECONDS", 0.0)  # every check reads the switch: nothing kept here is fresh
    sam, dana = await make_user("user"), await make_user("admin")
    await log_in(user, sam, landing="/login?redirect_to=/app/copilot")
    await user.should_see(marker="copilot-input", retries=WAIT)

    off = {"_id": switch.SWITCH_ID, "on": False, "changedBy": dana["id"], "changedAt": now()}
    await db["agent_config"].insert_one(off)  # what `switch.turn` stores, in a process of its own
    await user.open("/app/copilot")

    await user.should_see(AiTurnedOff.default_message, retries=WAIT)


async def test_ai_turned_on_again_in_another_process_brings_the_assistant_back_here(
    user: User, ai_on, make_user, log_in, db, monkeypatch
):
    monkeypatch.setattr(switch, "FRESH_SECONDS", 0.0)  # what this process kept is always too old to go by
    sam, dana = await make_user("user"), await make_user("admin")
    await agents.set_ai(db=db, actor=actor(dana), on=False)  # this process keeps it: off
    await db["agent_config"].update_one({"_id": switch.SWITCH_ID}, {"$set": {"on": True}})  # on again, elsewhere

    await log_in(user, sam)

    await user.should_see(marker="copilot-toggle")
    await user.should_not_see(marker="copilot-off")


async def test_every_open_tab_follows_the_desks_switch_off_and_on_again_without_a_reload(
    user: User, ai_on, make_user, log_in, create_user, db
):
    sam, priya, dana = await make_user("user"), await make_user("user"), await make_user("admin")
    other = create_user()
    await log_in(user, sam)
    await log_in(other, priya)
    for tab in (user, other):
        await tab.should_see(marker="copilot-toggle")

    await agents.set_ai(db=db, actor=actor(dana), on=False)  # Dana's click, in this process

    for tab in (user, other):
        await tab.should_see(marker="copilot-off")
        await tab.should_not_see(marker="copilot-toggle")
    (off,) = user.find(marker="copilot-off").elements
    assert off.props["aria-label"] == f"Assistant unavailable: {AiTurnedOff.default_message}"

    await agents.set_ai(db=db, actor=actor(dana), on=True)

    for tab in (user, other):
        await tab.should_see(marker="copilot-toggle")
        await tab.should_not_see(marker="copilot-off")
    user.find(marker="copilot-toggle").click()  # the drawer is there, working, as if the page had just opened
    await user.should_see(marker="copilot-input")


async def test_a_tab_follows_the_switch_turned_on_again_in_another_process(
    user: User, ai_on, make_user, log_in, db, monkeypatch
):
    """Its header and, on the Assistant page, the page's body alike."""
    monkeypatch.setattr(switch, "FRESH_SECONDS", 0.0)  # every look reads the switch
    monkeypatch.setattr(frame, "SWITCH_CHECK_SECONDS", 0.2)  # and the header looks often
    sam, dana = await make_user("user"), await make_user("admin")
    await agents.set_ai(db=db, actor=actor(dana), on=False)
    await log_in(user, sam, landing="/login?redirect_to=/app/copilot")
    await user.should_see(marker="copilot-off", retries=WAIT)
    await user.should_see(marker="copilot-page-off")

    await db["agent_config"].update_one({"_id": switch.SWITCH_ID}, {"$set": {"on": True}})  # as another process

    await user.should_see(marker="copilot-toggle")
    await user.should_not_see(marker="copilot-off")
    await user.should_see(marker="copilot-input", retries=WAIT)
    await user.should_not_see(marker="copilot-page-off")


async def test_the_assistant_page_follows_the_desks_switch_off_and_on_again_without_a_reload(
    user: User, ai_on, fake_provider, make_user, log_in, db
):
    sam, dana = await make_user("user"), await make_user("admin")
    await log_in(user, sam, landing="/login?redirect_to=/app/copilot")
    await user.should_see(marker="copilot-input", retries=WAIT)

    await agents.set_ai(db=db, actor=actor(dana), on=False)  # Dana's click, in this process

    await user.should_see(marker="copilot-page-off")
    await user.should_see(AiTurnedOff.default_message)
    await user.should_not_see(marker="copilot-input")
    await user.should_not_see(marker="copilot-new")

    await agents.set_ai(db=db, actor=actor(dana), on=True)

    await user.should_see(marker="copilot-input")
    await user.should_not_see(marker="copilot-page-off")
    fake_provider.script(Turn.text("Hello Sam."))  # the assistant is there, working, as if the page had just opened
    user.find(marker="copilot-input").type("Hello")
    user.find(marker="copilot-send").click()
    await user.should_see("Hello Sam.", retries=WAIT)
    await user.should_see(marker="run-asked", retries=WAIT)  # its list of runs follows too


async def test_the_assistant_page_says_what_would_bring_the_assistant(
    user: User, make_user, log_in, create_user, ai_settings, db
):
    use_settings(Settings(**{**ai_settings.model_dump(), "ai_enabled": False}))
    sam = await make_user("user")
    await log_in(user, sam, landing="/login?redirect_to=/app/copilot")
    await user.should_see(
        "AI is turned off on this desk: neither the assistant nor the triage agent runs.", retries=WAIT
    )
    await user.should_see("turns it on with AI_ENABLED and a provider")
    await user.should_not_see(marker="copilot-page-profile")

    use_settings(ai_settings)
    await db["users"].update_one({"_id": ObjectId(sam["id"])}, {"$set": {"aiEnabled": False}})
    await user.open("/app/copilot")
    await user.should_see("AI assistance is off for you. You can turn it on in your profile.", retries=WAIT)
    user.find(marker="copilot-page-profile").click()
    await user.should_see(marker="own-ai", retries=WAIT)


async def test_the_full_page_shows_the_conversation_and_what_each_run_asked(
    user: User, ai_on, fake_provider, make_user, log_in
):
    sam = await make_user("user")
    fake_provider.script(Turn.text("Nothing open right now."))
    await open_copilot(user, sam, log_in)
    ask(user, "Anything open?")
    await user.should_see("Nothing open right now.", retries=WAIT)

    await user.open("/app/copilot")

    await user.should_see("Nothing open right now.", retries=WAIT)  # the conversation itself, not a collapsed row
    with user.scope(marker="runs"):
        await user.should_see("Anything open?", retries=WAIT)
        await user.should_see("Complete")
    with user:
        assert len(list(ElementFilter(marker="copilot"))) == 1  # no second, empty panel in a drawer here
    user.find(marker="copilot-new").click()
    await user.should_not_see("Nothing open right now.", retries=WAIT)


async def test_a_waiting_change_follows_the_person_to_another_page(user: User, ai_on, db, open_the_copilot_by_sams_tap):
    sam, tap = await open_the_copilot_by_sams_tap(answer="It is urgent now.")
    ask(user, "Make the tap urgent")
    await user.should_see(marker="approval", retries=WAIT)
    user.find(marker="approval-dismiss").click()

    await user.open("/app/copilot")  # a full page load: the drawer's page is gone

    await user.should_see("Make the tap urgent", retries=WAIT)
    await user.should_see(marker="approval-chip", retries=WAIT)
    user.find(marker="approval-chip").click()
    user.find(marker="approve").click()
    await user.should_see("It is urgent now.", retries=WAIT)
    assert (await service.get(db=db, actor=actor(sam), order_id=tap.id)).priority == "urgent"


async def test_opening_the_drawer_with_a_change_waiting_puts_it_before_the_person(
    user: User, ai_on, db, open_the_copilot_by_sams_tap
):
    # found by a new user: after a reload only an amber chip showed the change, and it did not look clickable
    sam, tap = await open_the_copilot_by_sams_tap(answer="It is urgent now.")
    ask(user, "Make the tap urgent")
    await user.should_see(marker="approval", retries=WAIT)
    user.find(marker="approval-dismiss").click()

    await user.open("/app")  # a reload: the drawer is closed
    await user.should_see(marker="copilot-toggle", retries=WAIT)
    user.find(marker="copilot-toggle").click()

    await until(lambda: approval_open(user), what="the approval window to open with the drawer")
    (waiting,) = user.find(marker="approval-chip").elements
    assert isinstance(waiting, ui.button)  # a real button, read out as what it does
    assert waiting.props["aria-label"] == "Review the change waiting for your approval"
    user.find(marker="approve").click()
    await user.should_see("It is urgent now.", retries=WAIT)
    assert (await service.get(db=db, actor=actor(sam), order_id=tap.id)).priority == "urgent"


async def test_an_answer_whose_page_closed_finishes_and_is_there_on_return(
    user: User, ai_on, fake_provider, make_user, log_in, db
):
    sam = await make_user("user")
    fake_provider.script(Turn.slow("one two three four five six", delay=0.1, chunks=6))
    await open_copilot(user, sam, log_in)
    ask(user, "Count")
    await user.should_see(marker="copilot-thinking", retries=WAIT)  # before the first token: thinking, not only Stop

    await user.open("/app")  # left mid-answer

    await user.should_see(marker="copilot-stop", retries=WAIT)  # the turn still runs, and can be stopped here

    async def ended() -> dict | None:
        run = await db["agent_runs"].find_one({})
        return run if run and run["status"] != "running" else None

    await until(ended, what="the turn to end", within=WAIT / 5)
    assert (await ended())["status"] == "complete"
    await user.open("/app/copilot")
    await user.should_see("one two three four five six", retries=WAIT)


async def test_stop_reaches_a_turn_running_in_another_process(user: User, ai_on, make_user, log_in, db):
    sam = await make_user("user")
    await log_in(user, sam)
    session = await db["copilot_sessions"].find_one({"userId": ObjectId(sam["id"])})
    if session is None:
        await user.open("/app")
        session = await db["copilot_sessions"].find_one({"userId": ObjectId(sam["id"])})
    elsewhere = agent_runs.new_run(
        session_id=session["_id"], user_id=ObjectId(sam["id"]), mode="copilot", model="m", lease=timedelta(minutes=1)
    )
    await agent_runs.insert_run(db, elsewhere)  # a turn another web process runs: nothing of it in this one
    await copilot_sessions.claim_session(db, session["_id"], elsewhere["_id"])

    await user.open("/app")
    user.find(marker="copilot-toggle").click()
    await user.should_see(marker="copilot-stop", retries=WAIT)
    user.find(marker="copilot-stop").click()

    async def aborted() -> bool:  # its process stops at its next look
        return (await agent_runs.get_run(db, elsewhere["_id"]))["status"] == "aborted"

    await until(aborted, what="the other process's run to be aborted", within=WAIT / 10)


async def test_a_long_unbroken_value_wraps_and_can_be_read_whole(
    user: User, ai_on, fake_provider, make_user, make_order, log_in
):
    sam = await make_user("user")
    tap = await make_order(sam, "Leaking tap", description="x" * 3000)
    fake_provider.script(*Turn.read_then_update(tap.id, status="done"))
    await open_copilot(user, sam, log_in)
    ask(user, "Close it")
    await user.should_see(marker="approval", retries=WAIT)

    with user:
        (grid,) = list(ElementFilter(kind=ui.grid, marker="diff"))
        assert "minmax(0" in str(grid._style)  # columns never grow past the card, whatever a value holds
        shown = [e.text for e in grid.descendants() if isinstance(e, ui.label)]
    assert "x" * 3000 not in shown and any(t.startswith("x" * 400) for t in shown)
    user.find(marker="diff-show-all").click()
    await user.should_see("x" * 3000, retries=WAIT)


async def restaged(user: User, text: str) -> None:
    """Wait until exactly one approval dialog is open and its diff shows `text` (the old dialog is gone)."""

    def one_showing_it() -> bool:
        with user:
            diffs = list(ElementFilter(kind=ui.grid, marker="diff"))
            shown = [e.text for d in diffs for e in d.descendants() if isinstance(e, ui.label)]
        return len(diffs) == 1 and text in shown

    await until(one_showing_it, what=f"a re-staged approval showing {text!r}", within=WAIT / 10)
