"""Unwatermarked pass-through (``"watermark": false``): the request goes to the
OpenAI-compatible server behind the engine, unchanged but for its model."""

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel

from samark.serving.errors import ApiError
from samark.serving.schema import Body, GenerationRequest, error_body, sse

if TYPE_CHECKING:
    from openai import AsyncOpenAI


@dataclass(frozen=True)
class Upstream:
    """The OpenAI-compatible server behind the engine, for unwatermarked pass-through
    (``"watermark": false``): an ``openai.AsyncOpenAI`` client and its model name."""

    client: "AsyncOpenAI"
    model: str


async def pass_through(
    upstream: Upstream | None, input_field: str, req: GenerationRequest
) -> Body | Response:
    """An unwatermarked request, sent to the upstream unchanged (but for its model):
    ``input_field`` is "messages" (chat) or "prompt" (completions)."""
    import openai

    if upstream is None:
        raise ApiError(
            400,
            "this server has no upstream for unwatermarked completions",
            "invalid_request_error",
            "no_upstream",
        )
    body = req.model_dump(exclude_none=True, exclude={"watermark", "max_sentences", "model"})
    stream = bool(body.pop("stream", False))
    given = {input_field: body.pop(input_field)}  # the rest goes as it came
    client = upstream.client
    endpoint = client.chat.completions if input_field == "messages" else client.completions
    # one call for both endpoints; what it returns is narrowed below
    call: Callable[..., Awaitable[object]] = endpoint.create
    try:
        result = await call(
            model=upstream.model,
            stream=stream,
            extra_body=body,
            **given,
        )
    except openai.APITimeoutError:
        raise ApiError(504, "upstream timed out", "upstream_error", "upstream_timeout") from None
    except openai.APIConnectionError as exc:
        raise ApiError(502, f"upstream unreachable: {exc}", "upstream_error", "upstream") from None
    except openai.APIStatusError as exc:
        raise ApiError(
            502,
            f"upstream refused the request ({exc.status_code}): {exc.message}",
            "upstream_error",
            "upstream",
        ) from None
    if not stream:
        if not isinstance(result, BaseModel):
            raise TypeError(f"the upstream client answered a {type(result).__name__}")
        return dict(result.model_dump(mode="json", exclude_unset=True))
    if not isinstance(result, openai.AsyncStream):
        raise TypeError(f"the upstream client streamed a {type(result).__name__}")

    async def events() -> AsyncIterator[str]:
        try:
            async for chunk in result:
                yield f"data: {chunk.model_dump_json(exclude_unset=True)}\n\n"
        except openai.OpenAIError as exc:
            yield sse(error_body(f"upstream: {exc}", "upstream_error", "upstream"))
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")
