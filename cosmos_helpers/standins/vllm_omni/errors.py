"""Every error the stand-in answers gets vLLM's envelope ``{"error": {"message", "type", "param", "code"}}`` here
(never FastAPI's ``{"detail": ...}``, never a 422).

The ``type`` of a 400 follows vLLM-Omni: an ``HTTPException`` of its handlers shows the HTTP phrase ("Bad Request"),
as does a body FastAPI rejects (``N validation errors``, ``param`` ``body.<field>``); a ``ValueError`` or pydantic
error raised while it builds the request is "BadRequestError" with the exception's text.
"""

from __future__ import annotations

from typing import Mapping

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError as PydanticValidationError
from starlette.exceptions import HTTPException

from ...errors import ValidationError
from ...protocol.vllm_omni import error_body, validation_message

VALUE_ERROR = "BadRequestError"


class ApiError(HTTPException):
    """An HTTP error with vLLM's ``type`` and ``param``; FastAPI passes it through body parsing untouched."""

    def __init__(self, status: int, message: str, *, type: str | None = None, param: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status, detail=message, headers=dict(headers) if headers else None)
        self.message = message
        self.type = type
        self.param = param


def bad_request(message: str, *, param: str | None = None) -> ApiError:
    """What vLLM-Omni's own ``HTTPException(400, ...)`` looks like."""
    return ApiError(400, message, param=param)


def value_error(message: str, *, param: str | None = None) -> ApiError:
    """What a ``ValueError`` raised while vLLM-Omni builds the request looks like."""
    return ApiError(400, message, type=VALUE_ERROR, param=param)


def envelope(status: int, message: str, *, type: str | None = None, param: str | None = None,
             headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, type=type, param=param), status_code=status,
                        headers=dict(headers) if headers else None)


async def _http_error(_request, exc: HTTPException) -> JSONResponse:
    return envelope(exc.status_code, str(exc.detail), type=getattr(exc, "type", None),
                    param=getattr(exc, "param", None), headers=exc.headers)


async def _invalid_body(_request, exc: RequestValidationError) -> JSONResponse:
    message, param = validation_message(list(exc.errors()))
    return envelope(400, message, param=param)


async def _invalid_value(_request, exc: Exception) -> JSONResponse:
    """pydantic refusing ``VideoForm.to_request``, or ``GenerationRequest`` refusing a value."""
    return envelope(400, str(exc), type=VALUE_ERROR, param=getattr(exc, "field", None))


async def _unexpected(_request, exc: Exception) -> JSONResponse:
    return envelope(500, f"{type(exc).__name__}: {exc}")


def install(app) -> None:
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid_body)
    app.add_exception_handler(PydanticValidationError, _invalid_value)
    app.add_exception_handler(ValidationError, _invalid_value)
    app.add_exception_handler(Exception, _unexpected)
