"""/api/v1/admin/users: admins run the people of the desk."""

from typing import Annotated

from fastapi import APIRouter, Query

from desk.errors import ErrorCode
from desk.http import AUTHED, CurrentActor, Db, errors
from desk.schema import OffsetPage, PageQuery
from desk.users import service
from desk.users.models import UserAdminUpdate, UserCreate, UserRead

router = APIRouter(prefix="/api/v1/admin/users", tags=["admin"])


@router.get("", response_model=OffsetPage[UserRead], responses=errors(*AUTHED))
async def list_users(db: Db, actor: CurrentActor, page: Annotated[PageQuery, Query()]) -> OffsetPage[UserRead]:
    return await service.list_users(db=db, actor=actor, page=page)


@router.post("", status_code=201, response_model=UserRead, responses=errors(*AUTHED, ErrorCode.CONFLICT))
async def create_user(body: UserCreate, db: Db, actor: CurrentActor) -> UserRead:
    return await service.create_user(db=db, actor=actor, data=body)


@router.patch("/{user_id}", response_model=UserRead, responses=errors(*AUTHED, ErrorCode.NOT_FOUND))
async def update_user(user_id: str, body: UserAdminUpdate, db: Db, actor: CurrentActor) -> UserRead:
    """Change role, aiEnabled, active, name, or reset the password.

    A reset ends the person's sessions and revokes all their API tokens; deactivating ends their sessions, and
    their tokens answer 401 while they are inactive. Either, a role that can do less or AI turned off also stops
    their copilot runs (the service fires desk.users.access). An empty body, or a null for a field, is a 400.
    """
    return await service.update_user(db=db, actor=actor, user_id=user_id, data=body)
