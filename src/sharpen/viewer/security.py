"""The viewer's defences: access token, CSRF token, Host check and security headers.

* **Token.** When the app has a token (always, for a non-loopback ``--host``), every request
  must carry it: ``?token=…`` once (it is then kept in an HttpOnly cookie), the cookie, or an
  ``Authorization: Bearer …`` header. Otherwise 401.
* **Host check.** Bound to loopback without a token, only ``Host: localhost / 127.0.0.1 /
  [::1]`` is answered, so a web page cannot reach the viewer through DNS rebinding.
* **CSRF.** Each browser gets a random token in the ``sharpen_csrf`` cookie; every POST must
  echo it in the ``csrf`` form field or the ``X-CSRF-Token`` header (HTMX sends it), or 403.
* **Headers.** A strict Content-Security-Policy (``script-src 'self'``: no inline script,
  no eval, no event-handler attributes run even if escaping failed), ``nosniff``,
  ``frame-ancestors 'none'`` and ``Referrer-Policy: no-referrer`` (the token may be in a URL).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable

from fastapi import HTTPException, Request, Response
from fastapi.responses import PlainTextResponse, RedirectResponse

CSRF_COOKIE = "sharpen_csrf"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
TOKEN_COOKIE = "sharpen_token"
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


def is_local(host: str) -> bool:
    """Whether ``host`` (a bind address or name) is loopback only."""
    if host in LOCAL_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_token(host: str, token: str | None) -> tuple[str | None, bool]:
    """The token to require for binding ``host``: ``token`` if given; a new random one for a
    non-loopback host without one (second value ``True``: it was generated); else ``None``."""
    if token:
        return token, False
    if not is_local(host):
        return secrets.token_urlsafe(24), True
    return None, False


def _host_name(header: str) -> str:
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


Handler = Callable[[Request], Awaitable[Response]]


def security_middleware(token: str | None, allowed_hosts: frozenset[str] | None):
    """The ASGI HTTP middleware enforcing everything in this module's docstring."""

    async def middleware(request: Request, call_next: Handler) -> Response:
        if allowed_hosts is not None and _host_name(request.headers.get("host", "")) not in allowed_hosts:
            return _secure(PlainTextResponse("unknown Host header", status_code=421))
        set_token_cookie = False
        if token is not None:
            given = (request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE)
                     or request.headers.get("authorization", "").removeprefix("Bearer ").strip())
            if not given or not hmac.compare_digest(given.encode(), token.encode()):
                return _secure(PlainTextResponse(
                    "a token is required: open the URL `sharpen view` printed", status_code=401))
            if request.query_params.get("token") and request.method == "GET":
                # Keep the token in a cookie and drop it from the address bar.
                rest = {k: v for k, v in request.query_params.multi_items() if k != "token"}
                url = request.url.replace_query_params(**rest)
                response: Response = RedirectResponse(str(url), status_code=303)
                response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
                return _secure(response)
            set_token_cookie = request.cookies.get(TOKEN_COOKIE) != token
        csrf = request.cookies.get(CSRF_COOKIE)
        new_csrf = None
        if not csrf:
            csrf = new_csrf = secrets.token_urlsafe(24)
        request.state.csrf = csrf
        if request.method not in ("GET", "HEAD", "OPTIONS") and new_csrf is not None:
            return _secure(PlainTextResponse("CSRF token missing or wrong: reload the page",
                                             status_code=403))
        response = await call_next(request)
        if new_csrf is not None:
            response.set_cookie(CSRF_COOKIE, new_csrf, httponly=True, samesite="strict")
        if set_token_cookie and token is not None:
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
        return _secure(response)

    return middleware


def _secure(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


async def csrf_guard(request: Request) -> None:
    """App-wide dependency: a state-changing request must echo the CSRF cookie in the
    ``X-CSRF-Token`` header or the ``csrf`` form field, or it is refused with 403."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    expected = request.cookies.get(CSRF_COOKIE) or ""
    sent = request.headers.get(CSRF_HEADER)
    if not sent:
        form = await request.form()
        value = form.get(CSRF_FIELD)
        sent = value if isinstance(value, str) else ""
    if not expected or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise HTTPException(status_code=403, detail="CSRF token missing or wrong: reload the page")
