"""The routes, one router per concern: health and models, images, synchronous video, video jobs."""

from __future__ import annotations

from typing import Any

from ..models import ErrorEnvelope

_CAUSES = {
    400: "Bad input (validation, a guardrail block, a refused option)", 401: "Missing or wrong API key",
    404: "Unknown job (or malformed id), or its file is not ready", 413: "Request body too large",
    429: "Queue full; retry after Retry-After seconds (a stand-in feature)", 500: "Generation failed",
    504: "Synchronous generation timed out (queueing included)", "4XX": "Any other client error",
}
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorEnvelope, "description": text}
                                           for code, text in _CAUSES.items()}
