"""``samark serve``: an OpenAI-compatible watermarking endpoint and a detection API.

``create_app`` builds the FastAPI application from a loaded scheme and its settings; the
CLI adds uvicorn. Nothing here reads or logs the watermark key: the scheme holds it.
"""

from __future__ import annotations

from samark.serving.app import Keys, create_app
from samark.serving.settings import ServeSettings, load_tokens

__all__ = ["Keys", "ServeSettings", "create_app", "load_tokens"]
