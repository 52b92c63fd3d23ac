"""The two gates a request passes before routing: the API key and the body-size limit (pure ASGI).

Both answer in vLLM's envelope. Starlette's own body limit answers a declared oversize body in plain text, so the
limit is kept here: refused at once from ``Content-Length``, or while the body streams in (chunked uploads).
"""

from __future__ import annotations

import hmac
from typing import Any, Awaitable, Callable

from ..protocol.vllm_omni import IMAGES
from .errors import ApiError, envelope

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


class ApiKey:
    """``Authorization: Bearer <key>`` on ``/v1/*`` (vLLM's ``--api-key``); compared in constant time."""

    def __init__(self, app: Any, key: str) -> None:
        self.app = app
        self.key = key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1") and not self._allowed(scope):
            response = envelope(401, "Unauthorized: missing or wrong API key")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        header = dict(scope.get("headers", ())).get(b"authorization", b"")
        token = header[7:] if header[:7].lower() == b"bearer " else b""
        return hmac.compare_digest(token, self.key)


class BodyLimit:
    """Refuse a request body above ``max_request_bytes`` (the image route: ``max_field_bytes``) with 413."""

    def __init__(self, app: Any, *, max_request_bytes: int, max_json_bytes: int) -> None:
        self.app = app
        self.max_request_bytes = max_request_bytes
        self.max_json_bytes = max_json_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        limit = self.max_json_bytes if scope.get("path") == IMAGES else self.max_request_bytes
        too_large = ApiError(413, f"The request body is larger than the limit of {limit} bytes")
        declared = dict(scope.get("headers", ())).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            response = envelope(413, too_large.message, headers={"Connection": "close"})
            await response(scope, receive, send)
            return
        received = 0

        async def limited() -> dict:
            nonlocal received
            message = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise too_large  # an HTTPException: FastAPI's body reader lets it through to the handler
            return message

        await self.app(scope, limited, send)
