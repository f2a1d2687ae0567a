"""A request body's size limit, enforced before any route reads it."""

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from samark.serving.schema import error_body

#: a refused body is read and dropped up to this size before the 413 is sent
DRAIN_BYTES = 16_000_000


class BodyLimitMiddleware:
    """413 for a body over ``limit`` bytes, by its Content-Length or, for a chunked
    upload, as soon as the bytes read pass the limit (the body is buffered up to it and
    replayed to the route, so no route ever reads more)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > self.limit:
                await self._drain(receive)
                await self._refuse(send)
                return
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                if message.get("more_body", False):
                    await self._drain(receive)
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _drain(self, receive: Receive) -> None:
        """Read and drop the rest of a refused body (up to ``DRAIN_BYTES``), so that the
        client, still sending, receives the 413 instead of a broken connection."""
        drained = 0
        while drained <= DRAIN_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                return
            drained += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            error_body(
                f"the request is larger than this server takes ({_size(self.limit)}); send "
                "less at a time",
                "invalid_request_error",
                "too_large",
            )
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _size(limit: int) -> str:
    """A byte count as a reader says it: 1 MB, 512 kB, 900 bytes."""
    if limit >= 1_000_000:
        return f"{limit / 1_000_000:g} MB"
    if limit >= 1_000:
        return f"{limit / 1_000:g} kB"
    return f"{limit} bytes"
