"""``samark serve``: an OpenAI-compatible watermarking endpoint and a detection API.

``create_app`` builds the FastAPI application from a loaded scheme and its settings: a
:class:`Worker` (marking, generation, detection; no HTTP) behind the routers of
:mod:`samark.serving.routes`. The CLI adds uvicorn. Nothing here reads or logs the
watermark key: the scheme holds it.
"""

from __future__ import annotations

from samark.serving.app import create_app, tokenizer_chat_renderer
from samark.serving.settings import ServeSettings, load_tokens
from samark.serving.upstream import Upstream
from samark.serving.worker import Keys, Worker

__all__ = [
    "Keys",
    "ServeSettings",
    "Upstream",
    "Worker",
    "create_app",
    "load_tokens",
    "tokenizer_chat_renderer",
]
