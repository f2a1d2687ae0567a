"""``samark serve``: an OpenAI-compatible watermarking endpoint and a detection API.

``create_app`` builds the whole FastAPI application from a :class:`ServerConfig` (a key
or keyring, a scheme, an engine spec, and :class:`ServeSettings`: who may call, limits);
``scheme_app`` serves a scheme already loaded. Behind them, a :class:`Worker` (marking,
generation, detection; no HTTP) and the routers of :mod:`samark.serving.routes`. The CLI
adds uvicorn. Nothing here reads or logs the watermark key: the scheme holds it.
"""

from __future__ import annotations

from samark.serving.app import scheme_app, tokenizer_chat_renderer
from samark.serving.server import ServerConfig, create_app
from samark.serving.settings import ServeSettings, load_tokens
from samark.serving.upstream import Upstream
from samark.serving.worker import Keys, Worker

__all__ = [
    "Keys",
    "ServeSettings",
    "ServerConfig",
    "Upstream",
    "Worker",
    "create_app",
    "load_tokens",
    "scheme_app",
    "tokenizer_chat_renderer",
]
