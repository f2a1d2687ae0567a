"""Request bodies of the served routes (OpenAI's field names) and the response shapes."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from typing import Literal, NotRequired, TypeAlias, TypedDict

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: a JSON body the server builds and sends (a completion, a chunk, an answer): read back
#: only where the server itself fills it in (a manifest's text), narrowed there
Body: TypeAlias = dict[str, object]


class Mark(TypedDict):
    """What a marked completion says of its key (``samark``): its public id, its label
    and, from a keyring server asked for one, the payload written."""

    key_id: str
    key_label: str | None
    payload: NotRequired[int]


class Readiness(TypedDict):
    """``/readyz``'s state (``Worker.readiness``): ready or not, each check, and a load
    failure's note."""

    ready: bool
    checks: dict[str, bool]
    error: NotRequired[str]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, object]] | None = None

    def text(self) -> str:
        """The message's text; content parts other than text are refused."""
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        pieces = []
        for part in self.content:
            text = part.get("text")
            if part.get("type") != "text" or not isinstance(text, str):
                raise ValueError("only text content parts are supported")
            pieces.append(text)
        return "".join(pieces)


class GenerationRequest(BaseModel):
    """Fields shared by the two generation routes. Other OpenAI fields are accepted and
    do not change the output (the server's sampling settings apply); ``watermark``,
    ``max_sentences`` and ``payload`` are samark's own (``extra_body`` in the openai
    client)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    n: int | None = Field(default=None, ge=1)
    seed: int | None = None
    stream: bool = False
    watermark: bool = True
    max_sentences: int | None = Field(default=None, ge=1)
    #: the value a keyring server writes (the position of the key that marks the text)
    payload: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one_choice(self) -> GenerationRequest:
        if self.n not in (None, 1):
            raise ValueError("n > 1 is not supported: ask once per completion")
        return self


class ChatCompletionRequest(GenerationRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)

    def token_budget(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class CompletionRequest(GenerationRequest):
    prompt: str | list[str]

    def prompt_text(self) -> str:
        if isinstance(self.prompt, str):
            return self.prompt
        if len(self.prompt) != 1:
            raise ValueError("one prompt per request")
        return self.prompt[0]


class DetectRequest(BaseModel):
    """``text`` (one result) or ``texts`` (a list of results, in order)."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    texts: list[str] | None = None
    details: bool = False

    @model_validator(mode="after")
    def _exactly_one(self) -> DetectRequest:
        if (self.text is None) == (self.texts is None):
            raise ValueError("give exactly one of 'text' and 'texts'")
        return self


def completion_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def chat_completion(cid: str, model: str, text: str, finish: str, use: dict[str, int]) -> Body:
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": use,
    }


def chat_chunk(cid: str, model: str, delta: dict[str, str], finish: str | None = None) -> Body:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def text_completion(
    cid: str, model: str, text: str, finish: str | None, use: dict[str, int] | None
) -> Body:
    out: Body = {
        "id": cid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
    }
    if use is not None:
        out["usage"] = use
    return out


def error_body(message: str, kind: str, code: str | None = None) -> Body:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def sse(payload: Mapping[str, object]) -> str:
    """One server-sent event carrying ``payload`` as JSON."""
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"
