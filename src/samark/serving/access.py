"""Who may call: bearer tokens (``settings.tokens``), admin tokens (localisation details),
compared in constant time; and how many texts a caller may have detected per hour."""

import hashlib
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request

from samark.serving.errors import ApiError
from samark.serving.settings import ServeSettings


@dataclass(frozen=True)
class Caller:
    admin: bool
    #: who is counting against a budget: a hash of the token (never the token itself)
    id: str = "anonymous"


def bearer_caller(settings: ServeSettings) -> Callable[[Request], Caller]:
    """The routes' dependency: the request's caller, or 401."""

    def caller(request: Request) -> Caller:
        header = request.headers.get("authorization", "")
        scheme_, _, token = header.partition(" ")
        token = token.strip() if scheme_.lower() == "bearer" else ""
        admin = bool(token) and known(token, settings.admin_tokens)
        who = hashlib.sha256(token.encode()).hexdigest()[:16] if token else "anonymous"
        if admin or not settings.auth:
            return Caller(admin=admin, id=who)
        if not token:
            raise ApiError(401, "missing bearer token", "authentication_error", "no_token")
        if not known(token, settings.tokens):
            raise ApiError(401, "invalid bearer token", "authentication_error", "bad_token")
        return Caller(admin=False, id=who)

    return caller


class DetectBudget:
    """At most ``per_hour`` sentences detected per caller in any hour (a sliding window): a
    detection endpoint answers a forger's queries, and one who may ask without limit finds
    a human text flagged at alpha in about 1/alpha queries (docs/operators.md, Forgery);
    counting sentences, not texts, also bounds what a batch of long texts costs the server
    (every text counts at least one)."""

    def __init__(self, per_hour: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_hour = per_hour
        self.clock = clock
        self._spent: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def charge(self, caller: Caller, sentences: int) -> None:
        """Count ``sentences`` for ``caller``, or raise 429 (counting nothing) when they
        would exceed the budget."""
        now = self.clock()
        with self._lock:
            spent = self._spent.setdefault(caller.id, deque())
            while spent and spent[0] <= now - 3600.0:
                spent.popleft()
            if len(spent) + sentences > self.per_hour:
                wait = 3600.0 - (now - spent[0]) if spent else 3600.0
                raise ApiError(
                    429,
                    f"detection budget spent: {self.per_hour} sentences an hour per token; "
                    f"{len(spent)} used, try again in {wait:.0f} s",
                    "rate_limit_error",
                    "detect_budget",
                )
            spent.extend([now] * sentences)


def known(token: str, allowed: frozenset[str]) -> bool:
    """Constant-time membership (no early exit on the first matching token)."""
    found = False
    for candidate in allowed:
        found |= secrets.compare_digest(token.encode(), candidate.encode())
    return found
