"""/api/v1/admin/users: admins run the people of the desk; /api/v1/people: anyone signed in reads their names."""

from typing import Annotated

from fastapi import APIRouter, Query, Response

from desk.auth import service as auth_service
from desk.auth.models import TokenRead
from desk.errors import ErrorCode
from desk.http import AUTHED, CurrentActor, Db, SessionActor, errors
from desk.schema import OffsetPage
from desk.users import service
from desk.users.models import PersonRead, UserAdminUpdate, UserCreate, UserQuery, UserRead

router = APIRouter(prefix="/api/v1/admin/users", tags=["admin"])
people_router = APIRouter(prefix="/api/v1/people", tags=["work orders"])


@people_router.get("", response_model=list[PersonRead], responses=errors(*AUTHED))
async def people(db: Db, actor: CurrentActor) -> list[PersonRead]:
    """Everyone of the desk by name (id, name, active): the names behind requesterId, ownerId, actorId and authorId."""
    return await service.people(db=db, actor=actor)


@router.get("", response_model=OffsetPage[UserRead], responses=errors(*AUTHED))
async def list_users(db: Db, actor: CurrentActor, query: Annotated[UserQuery, Query()]) -> OffsetPage[UserRead]:
    """Everyone, sorted by name; `q`: those whose name or email contains it."""
    return await service.list_users(db=db, actor=actor, page=query)


@router.post(
    "",
    status_code=201,
    response_model=UserRead,
    responses=errors(*AUTHED, ErrorCode.CONFLICT, ErrorCode.RECENT_LOGIN_REQUIRED),
)
async def create_user(body: UserCreate, db: Db, actor: CurrentActor) -> UserRead:
    """Add a person with a role and a first password. Adding an admin needs a browser session that logged in
    within the last 15 minutes: with an API token it is a 403, from an older session a RECENT_LOGIN_REQUIRED."""
    return await service.create_user(db=db, actor=actor, data=body)


@router.get("/{user_id}", response_model=UserRead, responses=errors(*AUTHED, ErrorCode.NOT_FOUND))
async def read_user(user_id: str, db: Db, actor: CurrentActor) -> UserRead:
    """One person, as the list shows them (a script reads one by id rather than paging the list)."""
    return await service.read_user(db=db, actor=actor, user_id=user_id)


@router.patch(
    "/{user_id}",
    response_model=UserRead,
    responses=errors(*AUTHED, ErrorCode.NOT_FOUND, ErrorCode.CONFLICT, ErrorCode.RECENT_LOGIN_REQUIRED),
)
async def update_user(user_id: str, body: UserAdminUpdate, db: Db, actor: CurrentActor) -> UserRead:
    """Change role, aiEnabled, active, name, email (lower-cased; another person's is 409), or reset the password.

    A reset or a deactivation ends the person's sessions and revokes all their API tokens (reactivating does not
    bring them back). Either, a role that can do less or AI turned off also stops their copilot runs (the service
    fires desk.users.access). An empty body, or a null for a field, is a 400. A password is reset from a browser
    session only: with an API token it is a 403. A role that can do more, or a new email (one's own too), needs a
    browser session that logged in within the last 15 minutes: with a token a 403, from an older session a
    RECENT_LOGIN_REQUIRED.
    """
    return await service.update_user(db=db, actor=actor, user_id=user_id, data=body)


@router.post("/{user_id}/unlock", response_model=UserRead, responses=errors(*AUTHED, ErrorCode.NOT_FOUND))
async def unlock_user(user_id: str, db: Db, actor: CurrentActor) -> UserRead:
    """Lift the lock that failed logins put on an account (`lockedUntil` becomes null)."""
    return await service.unlock_user(db=db, actor=actor, user_id=user_id)


@router.get("/{user_id}/tokens", response_model=list[TokenRead], responses=errors(*AUTHED, ErrorCode.NOT_FOUND))
async def list_user_tokens(user_id: str, db: Db, actor: SessionActor) -> list[TokenRead]:
    """A person's personal API tokens with when each was last used, newest first (never their secrets); from a
    browser session only, as one's own tokens are (a leaked token must not list or revoke its owner's others)."""
    return await auth_service.list_tokens_of(db=db, actor=actor, user_id=user_id)


@router.delete(
    "/{user_id}/tokens/{token_id}",
    status_code=204,
    response_class=Response,
    responses=errors(*AUTHED, ErrorCode.NOT_FOUND),
)
async def revoke_user_token(user_id: str, token_id: str, db: Db, actor: SessionActor) -> None:
    """Revoke one of a person's API tokens: programs using it get 401 at once. From a browser session only."""
    await auth_service.revoke_token_of(db=db, actor=actor, user_id=user_id, token_id=token_id)
