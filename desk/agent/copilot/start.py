"""Starting a copilot turn: every check that can refuse it before anything streams.

Refusals here are the JSON envelope (spec §4.8); a turn let in is a `runtime.CopilotTurn`.
"""

import asyncio

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.access import DeskSwitch, require_ai, require_ai_on_desk
from desk.actors import Actor
from desk.agent.copilot import live
from desk.agent.copilot.prompt import Prompt, first_prompt
from desk.agent.copilot.turn import AGENT, CopilotTurn
from desk.agent.core import budget, history, switch
from desk.agent.core.provider import Provider
from desk.agent.core.record import LEASE
from desk.agent.core.store import agent_idempotency, agent_runs, copilot_sessions
from desk.config import Settings
from desk.errors import Conflict, ErrorCode, NotFound, RateLimited
from desk.schema import parse_object_id
from desk.users import service as users_service
from desk.users.models import UserRead


class ApprovalPending(Conflict):
    code = ErrorCode.AI_APPROVAL_PENDING
    default_message = "The assistant is still busy with your last message. Wait for it, or press Stop."


class MessageDuplicate(Conflict):
    code = ErrorCode.AI_MESSAGE_DUPLICATE
    default_message = "This message was already sent."


async def begin(
    *,
    db: AsyncDatabase,
    settings: Settings,
    provider: Provider,
    actor: Actor,
    session_id: str,
    content: str,
    ip: str,
    idempotency_key: str | None = None,
    user: dict | None = None,
) -> CopilotTurn:
    """Refuse early (AI off, someone else's session, budget, rate, a replayed key, a run in progress) or start the run.

    Everything here stands between the person and the first token, so it is two or three round trips
    side by side: claiming the session (after recording the idempotency key, when there is one) and
    letting the message in (rate and spend, budget.admit). While the database answers them, the
    first model call is made ready (`_prepare`), and the desk-wide AI switch is read if this process's
    read of it is over a second old (`switch.current`). When several checks fail, the first in that order
    is reported (the switch before them all), and whatever a refused turn took (the claim, the key) is
    given back. The run and the person's message are stored once the first token is out (`RunRecord.take`).
    `user` is the person's stored record when the caller has just read it (the HTTP route has).
    The rate limiter's minute is the Desk's clock's.
    """
    user = await require_ai_user(db, settings, actor, user, desk=switch.NEVER_FLIPPED)  # `_ai_on`, beside the claim
    oid = parse_object_id(session_id)
    if oid is None:
        raise NotFound("No such copilot session.")
    run = agent_runs.new_run(session_id=oid, user_id=user["_id"], mode="copilot", model=settings.ai_model, lease=LEASE)
    key = idempotency_key[:200] if idempotency_key else None
    opening = live.Opening()  # from here to its first event, other turns' bookkeeping gives way to this one
    session, admission, ready, _ = await asyncio.gather(
        _claim(db, session_id=oid, run=run, key=key),
        budget.admit(db, settings, user_id=actor.id, agent=AGENT, ip=ip, clock=state.current().clock),
        _prepare(oid, content, actor, settings, provider),
        _ai_on(db, settings),
        return_exceptions=True,
    )
    refusals = [outcome for outcome in (session, admission, ready, _) if isinstance(outcome, BaseException)]
    if refusals:
        opening.done()
        if not isinstance(session, BaseException):
            await _unclaim(db, session, run, key)
        raise min(refusals, key=_rank)
    assert isinstance(session, dict) and isinstance(admission, budget.Admission) and isinstance(ready, tuple)
    peeked, prompt = ready
    window = history.HISTORIES.confirmed(session, peeked)
    return CopilotTurn(
        db=db,
        settings=settings,
        provider=provider,
        actor=actor,
        run=run,
        session=session,
        content=content,
        window=window,
        admission=admission,
        opening=opening,
        prompt=prompt if peeked is not None and window is peeked.window else None,
    )


async def _prepare(
    session_id: ObjectId, content: str, actor: Actor, settings: Settings, provider: Provider
) -> tuple[history.Peeked | None, Prompt | None]:
    """The first model call, made from the conversation this process keeps while the database answers the claim.

    It is used when the claim shows the kept conversation is current (`Histories.confirmed`), which
    it is for every turn but the first of a conversation or one taken last in another web process.
    It waits one turn of the event loop first: the claim's and the admission's commands go out before it.
    """
    await asyncio.sleep(0)
    peeked = history.HISTORIES.peek(session_id)
    if peeked is None:
        return None, None
    prompt = first_prompt(actor, settings, [*peeked.window, history.kept("user", content)])
    return peeked, prompt._replace(call=provider.call(prompt.messages, prompt.tools))


class SessionClosed(Conflict):
    """Not AI_APPROVAL_PENDING: nothing is waiting, and a client that branches on the code must not wait."""

    default_message = "This conversation is closed; start a new one."


async def _claim(db: AsyncDatabase, *, session_id: ObjectId, run: dict, key: str | None) -> dict:
    """The session as it was before this run took it; the refusal when it cannot (in the order of `_rank`)."""
    if key:
        earlier = await agent_idempotency.remember_key(db, run["userId"], key, run["_id"])
        if earlier is not None:
            raise MessageDuplicate(details={"runId": str(earlier)})
    session = await copilot_sessions.claim_session(db, session_id, run["_id"], user_id=run["userId"])
    if session is not None:
        return session
    if key:  # this message started nothing: its retry must not read as a duplicate
        await agent_idempotency.forget_key(db, run["userId"], key)
    found = await copilot_sessions.get_session(db, session_id)  # only a refusal pays for this read: which one is it?
    if found is None or found["userId"] != run["userId"]:
        raise NotFound("No such copilot session.")  # SEC-14: someone else's session looks missing
    if found["status"] != "active":
        raise SessionClosed()
    raise ApprovalPending()


async def _unclaim(db: AsyncDatabase, session: dict, run: dict, key: str | None) -> None:
    """Give back what a turn refused by another check took: the session (history unchanged) and its key."""
    mark = session.get("historyMark", ObjectId())  # a session from before marks were kept stays unknown
    await copilot_sessions.release_session(db, session["_id"], run["_id"], history_mark=mark)
    if key:
        await agent_idempotency.forget_key(db, run["userId"], key)


async def _ai_on(db: AsyncDatabase, settings: Settings) -> None:
    """AiTurnedOff while an admin has AI turned off for the desk (as read at most a second ago)."""
    require_ai_on_desk(settings, await switch.current(db))


def _rank(refusal: BaseException) -> int:
    """Which refusal a person sees when several checks failed at once (a failure of our own comes first)."""
    order = (SessionClosed, NotFound, budget.BudgetExceeded, RateLimited, MessageDuplicate, ApprovalPending)
    return next((rank for rank, kind in enumerate(order, 1) if isinstance(refusal, kind)), 0)


async def require_ai_user(
    db: AsyncDatabase, settings: Settings, actor: Actor, user: dict | None = None, *, desk: DeskSwitch | None = None
) -> dict:
    """The person's stored id if they may use AI now (`access.can_use_ai`); `user`: their record, just read.

    `desk`: the desk-wide switch as the caller has it; else it is read as kept for up to a second (`switch.current`).
    """
    person: UserRead | dict | None = user
    if person is None and actor.is_human:
        person = await users_service.get_user(db=db, actor=actor, user_id=actor.id)
    if person is not None and str(person.id if isinstance(person, UserRead) else person["_id"]) != actor.id:
        person = None  # a record that is not the actor's lets no one in
    require_ai(person, settings=settings, switch=desk if desk is not None else await switch.current(db))
    return {"_id": ObjectId(actor.id), "aiEnabled": True}
