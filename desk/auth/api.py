"""/api/v1/auth: log in and out, who am I, personal API tokens."""

from fastapi import APIRouter, Depends, Request, Response, status

from desk.auth import service
from desk.auth.models import LoginRequest, PasswordChange, ProfileUpdate, TokenCreate, TokenCreated, TokenRead
from desk.errors import ErrorCode, Forbidden
from desk.http import (
    AUTHED,
    CurrentActor,
    CurrentUser,
    Db,
    SessionActor,
    clear_session_cookie,
    errors,
    require_csrf_header,
    session_cookie_name,
    set_session_cookie,
)
from desk.users import service as users_service
from desk.users.models import UserRead

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])
# Until the composition root installs them: every app that serves the API (and so the pages) imports this module.

NOT_A_SESSION = (
    "Logging out ends a browser session. To stop using this token, revoke it on your profile page, "
    "or with DELETE /api/v1/auth/tokens/{id} sent with the token itself."
)


@router.post(
    "/login",
    response_model=UserRead,
    dependencies=[Depends(require_csrf_header)],
    responses=errors(ErrorCode.UNAUTHORIZED, ErrorCode.FORBIDDEN, ErrorCode.RATE_LIMITED),
)
async def login(body: LoginRequest, request: Request, response: Response, db: Db) -> UserRead:
    """Check email and password; sets the session cookie."""
    ip = request.client.host if request.client else "unknown"
    done = await service.login(db=db, email=body.email, password=body.password, ip=ip)
    set_session_cookie(response, done.session_secret)
    return UserRead.model_validate(done.user)


@router.post("/logout", status_code=status.HTTP_204_NO_CONTENT, response_class=Response, responses=errors(*AUTHED))
async def logout(request: Request, response: Response, db: Db, user: CurrentUser) -> None:
    """End this browser session and the person's running copilot runs; with an API token it is a 403."""
    if request.headers.get("Authorization"):  # CurrentUser let it in: a valid bearer token, not a session
        raise Forbidden(NOT_A_SESSION)
    secret = request.cookies.get(session_cookie_name())
    if secret:
        await service.logout(db=db, secret=secret)  # the service stops their copilot runs too
    clear_session_cookie(response)


@router.get("/me", response_model=UserRead, responses=errors(*AUTHED))
async def me(user: CurrentUser) -> UserRead:
    return UserRead.model_validate(user)


@router.patch("/me", response_model=UserRead, responses=errors(*AUTHED), summary="Change own settings")
async def update_me(body: ProfileUpdate, db: Db, actor: CurrentActor) -> UserRead:
    """Switch one's own AI use off and on (`aiEnabled`), as on the profile page; off stops one's copilot runs."""
    return await users_service.set_own_ai(db=db, actor=actor, enabled=body.ai_enabled)


@router.post(
    "/password",
    status_code=204,
    response_class=Response,
    responses=errors(*AUTHED, ErrorCode.RATE_LIMITED),
    summary="Change own password",
)
async def change_password(body: PasswordChange, request: Request, db: Db, actor: SessionActor) -> None:
    """Change one's own password, from a browser session only; this session stays, every other one ends.

    With `revokeTokens: true` every personal API token is revoked too. Checks of the current password are
    rate-limited per account.
    """
    await users_service.change_own_password(
        db=db,
        actor=actor,
        current=body.current_password,
        new=body.new_password,
        keep_session=request.cookies.get(session_cookie_name()),
        revoke_tokens=body.revoke_tokens,
    )


@router.post("/tokens", status_code=201, response_model=TokenCreated, responses=errors(*AUTHED))
async def create_token(body: TokenCreate, db: Db, actor: SessionActor) -> TokenCreated:
    """A new personal API token, from a browser session only. The secret is shown in this answer only.

    `scopes`: what it may do, of `read` (GET), `write` (any other method) and `admin` (/api/v1/admin/, admins
    only: a 403 for anyone else); by default read and write, and admin for an admin. `expiresInDays`: 1 to 365,
    by default 90; an expired token is a 401, as a revoked one.
    """
    return await service.create_token(
        db=db, actor=actor, name=body.name, scopes=body.scopes, expires_in_days=body.expires_in_days
    )


@router.get("/tokens", response_model=list[TokenRead], responses=errors(*AUTHED))
async def list_tokens(db: Db, actor: SessionActor) -> list[TokenRead]:
    """One's own tokens, from a browser session only (a token may still revoke itself)."""
    return await service.list_tokens(db=db, actor=actor)


@router.delete(
    "/tokens/{token_id}", status_code=204, response_class=Response, responses=errors(*AUTHED, ErrorCode.NOT_FOUND)
)
async def revoke_token(token_id: str, request: Request, db: Db, actor: CurrentActor) -> None:
    """Revoke one of your tokens; with an API token, only that token itself (the others need a browser session)."""
    _, _, secret = request.headers.get("Authorization", "").partition(" ")  # current_user let in a bearer token
    await service.revoke_token(db=db, actor=actor, token_id=token_id, by_token=secret.strip() or None)
