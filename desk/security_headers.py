"""Security headers on every HTTP answer, pages and API alike: an ASGI middleware the app's assembly mounts outermost.

NiceGUI renders each page with inline scripts and styles, evaluates `:`-props and `run_javascript` code with
`eval`/`new Function`, and its CSS engines write <style> elements at run time, so the CSP allows
'unsafe-inline' and 'unsafe-eval' for script elements and 'unsafe-inline' for styles (docs/security.md says
why nonces do not fit). What it does hold: no inline event handler attribute ever runs (`script-src-attr
'none'`: an `onmouseover=` that got into the page is inert; NiceGUI and Quasar bind events as Vue listeners),
nothing loads from another origin, no plugin, no <base> rewrite, forms post only here, and no other site may
frame the desk (clickjacking an approval). HSTS only when served over https.
"""

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline' 'unsafe-eval'",
        "script-src-attr 'none'",  # onclick=, onerror=, onmouseover=: never the desk's, always an injection
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",  # same-origin ws:/wss: is 'self' in CSP Level 3 browsers
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
HSTS = "max-age=31536000; includeSubDomains"


class SecurityHeaders:
    """Add the desk's security headers to every HTTP response (a header the app set itself is kept)."""

    def __init__(self, app: ASGIApp, *, https: bool) -> None:
        self.app = app
        self.headers = [
            (b"content-security-policy", CSP.encode()),
            (b"x-frame-options", b"DENY"),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"same-origin"),
        ]
        if https:
            self.headers.append((b"strict-transport-security", HSTS.encode()))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(name, value) for name, value in self.headers if name not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)
