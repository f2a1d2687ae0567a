"""Who may call: bearer tokens (``settings.tokens``), admin tokens (localisation details),
compared in constant time."""

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request

from samark.serving.errors import ApiError
from samark.serving.settings import ServeSettings


@dataclass(frozen=True)
class Caller:
    admin: bool


def bearer_caller(settings: ServeSettings) -> Callable[[Request], Caller]:
    """The routes' dependency: the request's caller, or 401."""

    def caller(request: Request) -> Caller:
        header = request.headers.get("authorization", "")
        scheme_, _, token = header.partition(" ")
        token = token.strip() if scheme_.lower() == "bearer" else ""
        admin = bool(token) and known(token, settings.admin_tokens)
        if admin or not settings.auth:
            return Caller(admin=admin)
        if not token:
            raise ApiError(401, "missing bearer token", "authentication_error", "no_token")
        if not known(token, settings.tokens):
            raise ApiError(401, "invalid bearer token", "authentication_error", "bad_token")
        return Caller(admin=False)

    return caller


def known(token: str, allowed: frozenset[str]) -> bool:
    """Constant-time membership (no early exit on the first matching token)."""
    found = False
    for candidate in allowed:
        found |= secrets.compare_digest(token.encode(), candidate.encode())
    return found
