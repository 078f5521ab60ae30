"""Who may use AI and who is an admin (desk/access.py), as a client of the services and the API notices it."""

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from bson import ObjectId

from desk.access import AI_OFF_FOR_YOU, AI_OFF_ON_DESK
from desk.actors import SYSTEM_TRIAGE, Actor, Role
from desk.agent.triage import manual, policy
from desk.agent.triage import service as triage_service
from desk.agent.triage.models import AgentConfigUpdate, RunQuery
from desk.audit import service as audit_service
from desk.audit.models import AuditQuery
from desk.auth import service as auth_service
from desk.errors import Forbidden
from desk.metrics import service as metrics_service
from desk.schema import PageQuery
from desk.users import service as users_service
from desk.users.models import UserAdminUpdate, UserCreate
from desk.work_orders import triage_door
from tests.helpers import PASSWORD, actor

AI = "/api/v1/ai"
SYSTEM_WITH_ADMIN_ROLE = Actor(id=str(ObjectId()), role=Role.ADMIN, kind="system")
ANY_ID = str(ObjectId())

Call = Callable[[Any, Any, Actor, str], Awaitable[object]]

# Every admin-only service entry, called as `who` on the person `target` (db, settings, who, target).
ADMIN_ONLY: dict[str, Call] = {
    "list people": lambda db, s, who, target: users_service.list_users(db=db, actor=who, page=PageQuery()),
    "add a person": lambda db, s, who, target: users_service.create_user(
        db=db, actor=who, data=UserCreate(email="new@example.com", name="New", role="user", password=PASSWORD)
    ),
    "read a person": lambda db, s, who, target: users_service.read_user(db=db, actor=who, user_id=target),
    "change a person": lambda db, s, who, target: users_service.update_user(
        db=db, actor=who, user_id=target, data=UserAdminUpdate(role="viewer")
    ),
    "unlock a person": lambda db, s, who, target: users_service.unlock_user(db=db, actor=who, user_id=target),
    "read the audit log": lambda db, s, who, target: audit_service.list_entries(db=db, actor=who, query=AuditQuery()),
    "read the triage policy": lambda db, s, who, target: policy.get_config(db=db, settings=s, actor=who),
    "change the triage policy": lambda db, s, who, target: policy.update_config(
        db=db, settings=s, actor=who, data=AgentConfigUpdate(version=1, mode="auto_apply")
    ),
    "pull the kill switch": lambda db, s, who, target: triage_service.set_ai(db=db, actor=who, on=False),
    "read the agents' audit": lambda db, s, who, target: policy.audit(db=db, actor=who),
    "requeue a dead letter": lambda db, s, who, target: triage_service.retry_event(db=db, actor=who, event_id=ANY_ID),
    "run triage by hand": lambda db, s, who, target: manual.manual_run(
        db=db, settings=s, provider=None, actor=who, order_id=ANY_ID
    ),
    "list agent runs": lambda db, s, who, target: triage_service.list_runs(db=db, actor=who, query=RunQuery()),
    "read a transcript": lambda db, s, who, target: triage_service.run_detail(db=db, actor=who, run_id=ANY_ID),
    "the attention list": lambda db, s, who, target: triage_service.attention(db=db, actor=who, offset=0, limit=10),
    "the worker's health": lambda db, s, who, target: triage_service.health(db=db, settings=s, actor=who),
    "runs' costs": lambda db, s, who, target: triage_service.run_extras(db=db, actor=who, run_ids=[]),
    "triage per day": lambda db, s, who, target: triage_service.per_day(db=db, actor=who),
    "desk metrics": lambda db, s, who, target: metrics_service.desk_metrics(db=db, actor=who),
    "someone's API tokens": lambda db, s, who, target: auth_service.list_tokens_of(db=db, actor=who, user_id=target),
}


@pytest.mark.parametrize("who", [SYSTEM_TRIAGE, SYSTEM_WITH_ADMIN_ROLE], ids=["triage agent", "system with admin role"])
@pytest.mark.parametrize("entry", list(ADMIN_ONLY))
async def test_a_system_actor_is_never_an_admin(entry, who, db, settings, make_user):
    sam = await make_user("user")

    with pytest.raises(Forbidden) as refused:
        await ADMIN_ONLY[entry](db, settings, who, sam["id"])

    assert refused.value.message.startswith("Only admins can ")
    assert (await db["users"].find_one({"_id": ObjectId(sam["id"])}))["role"] == "user"  # nothing was changed


@pytest.mark.parametrize("entry", ["list people", "read the audit log", "read the triage policy", "desk metrics"])
async def test_a_person_who_is_not_an_admin_reads_why(entry, db, settings, make_user):
    sam = await make_user("user")

    with pytest.raises(Forbidden) as refused:
        await ADMIN_ONLY[entry](db, settings, actor(sam), sam["id"])

    assert refused.value.message.startswith("Only admins can ")


@pytest.mark.parametrize("entry", ["list people", "read the audit log", "read the triage policy", "desk metrics"])
async def test_an_admin_is_let_in(entry, db, settings, make_user):
    ada, sam = await make_user("admin"), await make_user("user")

    assert await ADMIN_ONLY[entry](db, settings, actor(ada), sam["id"]) is not None


async def test_a_person_who_turned_ai_off_reads_the_one_reason(provider, client_for, make_user, db):
    sam = await make_user("user")
    client = await client_for(sam)
    await users_service.set_own_ai(db=db, actor=actor(sam), enabled=False)

    response = await client.post(f"{AI}/sessions")

    assert response.status_code == 403
    assert response.json()["error"] == {"code": "FORBIDDEN", "message": AI_OFF_FOR_YOU}
    assert await db["copilot_sessions"].count_documents({}) == 0


async def test_a_person_an_admin_turned_ai_off_for_reads_the_same_reason(provider, client_for, make_user, change_user):
    sam = await make_user("user")
    client = await client_for(sam)
    await change_user(sam, aiEnabled=False)

    response = await client.post(f"{AI}/sessions")

    assert (response.status_code, response.json()["error"]["message"]) == (403, AI_OFF_FOR_YOU)


async def test_with_ai_off_on_the_desk_everyone_reads_that_instead(settings, client_for, make_user):
    assert settings.ai_enabled is False  # the default: a fresh checkout has no AI
    sam = await make_user("user")
    client = await client_for(sam)

    response = await client.post(f"{AI}/sessions")

    assert (response.status_code, response.json()["error"]["message"]) == (403, AI_OFF_ON_DESK)


async def test_a_person_with_ai_on_opens_a_conversation(provider, client_for, make_user):
    client = await client_for(await make_user("user"))

    assert (await client.post(f"{AI}/sessions")).status_code == 201


async def test_an_order_of_someone_deactivated_is_still_triaged_unless_they_turned_ai_off(
    make_user, make_order, change_user, db
):
    sam = await make_user("user")
    order = await make_order(sam)

    async def allowed() -> bool:
        return (await triage_door.triage_read(db=db, actor=SYSTEM_TRIAGE, order_id=order.id)).ai_allowed

    sam = await change_user(sam, active=False)  # gone from the team: the order is still the team's to work on
    assert await allowed()
    await change_user(sam, aiEnabled=False)  # their words go to no model, even now
    assert not await allowed()
