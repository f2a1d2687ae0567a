"""The detection page at ``/``: plain HTML, CSS and JavaScript shipped with the package
(``serving/page_files/``), which call ``POST /v1/detect`` from the browser with the caller's own
token, so the page has exactly the API's access rules (tokens, admin-only details, the
decision-only view, the per-token budget). The files hold nothing secret; they are the
same for every caller.

A Content-Security-Policy keeps the page to its own server: no script, style, image or
connection comes from anywhere else, so it works offline and a pasted text cannot run
code in it.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

#: the page's files, by the name it is fetched under, and their media types
PAGE_FILES = {
    "index.html": "text/html; charset=utf-8",
    "page.css": "text/css; charset=utf-8",
    # the script, in the order index.html loads them: reading a text, drawing an answer,
    # then the page itself
    "reading.js": "text/javascript; charset=utf-8",
    "drawing.js": "text/javascript; charset=utf-8",
    "page.js": "text/javascript; charset=utf-8",
}

#: the server itself and nothing else (``data:`` is the empty favicon; the report's
#: download is a ``blob:`` link, which no directive restricts)
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)


def page_file(name: str) -> bytes:
    """A file of the page, from the package's data."""
    return resources.files("samark.serving").joinpath("page_files", name).read_bytes()


def page_router() -> APIRouter:
    """``GET /`` (the page) and ``GET /page/NAME`` (its style and scripts, ``PAGE_FILES``);
    open like ``/healthz``: the page asks for the token and sends it with each detection."""
    router = APIRouter()
    files = {name: page_file(name) for name in PAGE_FILES}
    headers = {
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }

    def served(name: str) -> Response:
        return Response(files[name], media_type=PAGE_FILES[name], headers=headers)

    @router.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def index() -> Response:
        return served("index.html")

    @router.api_route("/page/{name}", methods=["GET", "HEAD"], include_in_schema=False)
    async def asset(name: str) -> Response:
        if name not in files or name == "index.html":
            return Response(status_code=404)
        return served(name)

    return router
