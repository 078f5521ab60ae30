"""The API's contract as clients read it: the OpenAPI schema (with its security schemes) and /api/docs.

The docs page is Swagger UI served by the desk itself, from the `swagger-ui-bundle-v2` package: it
works with no network beyond the desk, and under the desk's CSP, which allows only 'self'.
"""

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from desk.http import CSRF_HEADER, session_cookie_name
from desk.middleware import MAX_BODY_BYTES

DOCS = "/api/docs"
ASSETS = f"{DOCS}/assets"
# Operations anyone may call: logging in (with the CSRF header alone), the probes of a load balancer, and an
# email's one-click unsubscribe link (its signed token is the proof, RFC 8058).
OPEN = {("/api/v1/auth/login", "post"): [{"csrfHeader": []}], ("/healthz", "get"): None, ("/readyz", "get"): None}
UNSUBSCRIBE = "/api/v1/notifications/unsubscribe/{token}"
OPEN |= {(UNSUBSCRIBE, "get"): None, (UNSUBSCRIBE, "post"): None}
# The docs' sections (the routes' tags) in reading order, whatever order the routes are matched in.
SECTIONS = ("health", "auth", "work orders", "attachments", "notifications", "admin", "ai", "agents")


def install_docs(app: FastAPI) -> None:
    """/api/docs from the desk's own files, and an OpenAPI schema with its security and without FastAPI's 422s."""
    app.mount(ASSETS, StaticFiles(directory=swagger_ui_path), name="swagger-ui")

    @app.get(DOCS, include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/api/openapi.json",
            title=f"{app.title} docs",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
            swagger_ui_parameters={"persistAuthorization": False, "withCredentials": True},
        )

    app.openapi = lambda: _schema(app)


def _schema(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema is None:
        tags = [{"name": name} for name in SECTIONS]
        schema = get_openapi(title=app.title, version=app.version, routes=app.routes, tags=tags)
        schema.setdefault("components", {})["securitySchemes"] = security_schemes()
        for path, operations in schema.get("paths", {}).items():
            for method, operation in operations.items():
                # FastAPI documents a 422 on every route with input; the desk answers those as 400 in the envelope.
                operation.get("responses", {}).pop("422", None)
                if "requestBody" in operation:  # any body over the limit, on any route (desk.middleware.BodyLimit)
                    operation["responses"]["413"] = TOO_LARGE
                if (security := OPEN.get((path, method), SIGNED_IN)) is not None:
                    operation["security"] = security
        app.openapi_schema = schema
    return app.openapi_schema


TOO_LARGE = {
    "description": f"VALIDATION_ERROR: the body is over {MAX_BODY_BYTES // 1024} KiB; nothing was saved",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}},
}


def security_schemes() -> dict[str, Any]:
    return {
        "bearerToken": {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token (POST /api/v1/auth/tokens from a browser session), sent as "
            "`Authorization: Bearer <token>`. Exempt from the CSRF header. A token cannot make or list tokens.",
        },
        "sessionCookie": {
            "type": "apiKey",
            "in": "cookie",
            "name": session_cookie_name(),
            "description": "The browser session set by POST /api/v1/auth/login (httpOnly, SameSite=Lax).",
        },
        "csrfHeader": {
            "type": "apiKey",
            "in": "header",
            "name": CSRF_HEADER,
            "description": f"`{CSRF_HEADER}: 1` on every request with the session cookie that changes something "
            "(and on the login itself); without it such a request is a 403.",
        },
    }


# Either a bearer token, or the session cookie with the CSRF header.
SIGNED_IN = [{"bearerToken": []}, {"sessionCookie": [], "csrfHeader": []}]
