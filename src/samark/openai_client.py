"""The one way samark opens an OpenAI-compatible client (servers, chat endpoints).

The API key comes from an environment variable, never from a file samark writes; retries
with backoff and timeouts are the ``openai`` client's own.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

from samark.errors import SamarkError

if TYPE_CHECKING:
    from openai import AsyncOpenAI


def _openai() -> ModuleType:
    try:
        import openai
    except ImportError:
        raise SamarkError(
            "OpenAI-compatible servers and endpoints need `pip install 'samark[server]'`"
        ) from None
    return openai


# its result stays untyped until evaluation/chat.py passes openai's message types
def openai_client(base_url: str, *, api_key_env: str, timeout: float, max_retries: int) -> Any:
    return _openai().OpenAI(
        base_url=base_url,
        api_key=os.environ.get(api_key_env) or "EMPTY",
        timeout=timeout,
        max_retries=max_retries,
    )


def async_openai_client(
    base_url: str, *, timeout: float, api_key_env: str = "OPENAI_API_KEY"
) -> AsyncOpenAI:
    """The async client of a server's pass-through (no retries: its caller is waiting)."""
    client: AsyncOpenAI = _openai().AsyncOpenAI(
        base_url=base_url,
        api_key=os.environ.get(api_key_env) or "EMPTY",
        timeout=timeout,
        max_retries=0,
    )
    return client
