"""Errors answered as OpenAI answers them: ``{"error": {"message", "type", "code"}}``, for
every failure of every route (validation, unknown paths, crashes included)."""

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from samark.serving.schema import error_body

log = logging.getLogger("samark.serve")


class ApiError(Exception):
    """An error answered as OpenAI does: ``{"error": {"message", "type", "code"}}``."""

    def __init__(self, status: int, message: str, kind: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.code = code


def timeout_error(seconds: float) -> ApiError:
    """The 504 of a request that waited or ran past the time limit."""
    return ApiError(504, f"the request took longer than {seconds:g} s", "timeout_error", "timeout")


def install_error_handlers(app: FastAPI) -> None:
    """One JSON shape for every failure; a crash logs its type only (never the request)."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse(
            error_body(exc.message, exc.kind, exc.code), status_code=exc.status, headers=headers
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(
            error_body(validation_message(exc), "invalid_request_error", "invalid_body"),
            status_code=400,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.detail == FASTAPI_BODY_ERROR:
            # a body that is not UTF-8 (raw binary): the framework's words say nothing
            return JSONResponse(error_body(*NOT_TEXT_BODY), status_code=400)
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        code = HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
        return JSONResponse(error_body(str(exc.detail), kind, code), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        log.error("internal error: %s", type(exc).__name__)
        return JSONResponse(error_body("internal server error", "server_error", "internal"), 500)


#: FastAPI's words for a JSON body it could not decode (bytes that are not UTF-8)
FASTAPI_BODY_ERROR = "There was an error parsing the body"
NOT_TEXT_BODY = (
    "the request body is binary, not JSON text: send a JSON object such as "
    '{"text": "..."} (Content-Type: application/json, UTF-8)',
    "invalid_request_error",
    "binary",
)


#: the code of an error that starlette raised (every error names one)
HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    415: "unsupported_media_type",
}


def validation_message(exc: RequestValidationError) -> str:
    """The first validation error, said plainly."""
    errors = exc.errors()
    if not errors:
        return "invalid request body"
    first = errors[0]
    if first.get("type") == "json_invalid":
        return "the request body is not valid JSON"
    if tuple(first.get("loc", ())) == ("body",) and first.get("type") in (
        "model_attributes_type",
        "dict_type",
    ):
        return "the request body must be a JSON object (Content-Type: application/json)"
    where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
    message = str(first.get("msg", "invalid"))
    # pydantic words a validator's own ValueError "Value error, ..."; ours says it alone
    message = message.removeprefix("Value error, ")
    return f"{where}: {message}" if where else message
