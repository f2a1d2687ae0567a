"""The one way samark opens an OpenAI-compatible client (servers, chat endpoints).

The API key comes from an environment variable, never from a file samark writes; retries
with backoff and timeouts are the ``openai`` client's own.
"""

from __future__ import annotations

import os
from typing import Any

from samark.errors import SamarkError


def openai_client(base_url: str, *, api_key_env: str, timeout: float, max_retries: int) -> Any:
    try:
        import openai
    except ImportError:
        raise SamarkError(
            "OpenAI-compatible servers and endpoints need `pip install 'samark[server]'`"
        ) from None
    return openai.OpenAI(
        base_url=base_url,
        api_key=os.environ.get(api_key_env) or "EMPTY",
        timeout=timeout,
        max_retries=max_retries,
    )
