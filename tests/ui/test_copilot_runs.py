"""The person's copilot conversations as the pages show them: "Your runs" on /app/copilot, each opening its
conversation read only (the person's own alone), and where a conversation began (an API client's is labelled)."""

from nicegui.testing import User

from tests.fake_provider import Turn
from tests.ui.conftest import WAIT

AI = "/api/v1/ai"


async def ask_over_the_api(client_for, person: dict, question: str) -> str:
    """One real copilot run, asked over the API; returns its id."""
    client = await client_for(person)
    session_id = (await client.post(f"{AI}/sessions")).json()["id"]
    async with client.stream("POST", f"{AI}/sessions/{session_id}/messages", json={"content": question}) as response:
        await response.aread()
    assert response.status_code == 200
    (run,) = (await client.get(f"{AI}/runs")).json()
    return run["id"]


async def test_a_past_run_opens_and_reads_as_its_conversation(
    user: User, ai_settings, provider, fake_provider, make_user, log_in, client_for
):
    # found by a new user: the runs looked clickable and did nothing
    sam = await make_user("user", name="Sam Rivera")
    fake_provider.script(Turn.text("You have no open orders."))
    await ask_over_the_api(client_for, sam, "What is open for me?")
    await log_in(user, sam, landing="/login?redirect_to=/app/copilot")
    await user.should_see(marker="run-asked", retries=WAIT)

    user.find(marker="run-asked").click()

    await user.should_see(marker="past-transcript", retries=WAIT)
    said = [label.text for label in sorted(user.find(marker="past-message").elements, key=lambda e: e.id)]
    assert said == ["What is open for me?", "You have no open orders."]


async def test_someone_elses_run_is_not_theirs_to_read(
    user: User, ai_settings, provider, fake_provider, make_user, log_in, client_for
):
    sam, priya = await make_user("user"), await make_user("user")
    fake_provider.script(Turn.text("Your order is done."))
    run_id = await ask_over_the_api(client_for, sam, "Is my tap fixed?")

    await log_in(user, priya, landing=f"/app/copilot/runs/{run_id}")

    await user.should_see(marker="missing", retries=WAIT)
    await user.should_not_see("Your order is done.")


async def test_a_conversation_an_api_client_started_says_so_in_the_drawer(
    user: User, ai_settings, provider, fake_provider, make_user, log_in, client_for
):
    # found by an API client's owner: the script's conversation sat in their drawer as if they had typed it
    sam = await make_user("user")
    fake_provider.script(Turn.text("Two orders are open."))
    await ask_over_the_api(client_for, sam, "How many orders are open?")
    await log_in(user, sam, landing="/login?redirect_to=/app/copilot")

    await user.should_see("Two orders are open.", retries=WAIT)
    await user.should_see(marker="copilot-origin")
    await user.should_see("Started from the API")

    user.find(marker="copilot-new").click()  # a conversation of the desk's own pages: nothing to say

    await user.should_not_see("Two orders are open.", retries=WAIT)
    await user.should_not_see(marker="copilot-origin")
