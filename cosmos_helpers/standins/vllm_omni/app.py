"""``create_app``: the FastAPI app of the local vLLM-Omni 0.30.0 stand-in. Like ``vllm serve`` it loads the model
before it serves, so a server that answers is ready. The API key and body limit gates are pure ASGI, to answer in
vLLM's envelope (Starlette's body limit answers in plain text) from ``Content-Length`` or mid-stream (chunked).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from ...backends.diffusers import DiffusersBackend
from ...presets import model_for
from ...protocol.vllm_omni import IMAGES, SYNC_TIMEOUT_S, VERSION
from ...step_cache import StepCache, check_for_backend, check_step_cache
from .settings import ServerLimits
from .models import ApiError, envelope, install_error_handlers
from .references import TransferRunner
from .routes import router
from .state import JobStore, SerialWorker, ServerState


def create_app(backend: Any = None, *, api_key: str | None = None, served_model_name: str | None = None,
               model: str | None = None, storage_dir: str | Path | None = None, sync_timeout: float = SYNC_TIMEOUT_S,
               guardrails: bool = False, transfer_runner: TransferRunner | None = None, step_progress: bool = False,
               warmup: bool = True, limits: ServerLimits | None = None, step_cache: StepCache = None,
               **limit_options: Any) -> FastAPI:
    """The app serving ``model`` (``tiny``, a hub id or a checkpoint folder; default the default profile's) through
    ``backend`` (``generate(request, progress=cb)``, ``pipeline(model)`` to load ahead; default ``DiffusersBackend``).
    The options are ``cosmos-helpers serve``'s flags (:mod:`.cli`); ``storage_dir`` defaults to a fresh temporary
    folder, ``guardrails`` is off here (vLLM-Omni refuses to start without ``cosmos_guardrail``, which CPU machines
    lack), without a ``transfer_runner`` a transfer request gets 400, and ``limit_options`` override single fields of
    ``limits``, e.g. ``create_app(max_queue=4)``."""
    limits = replace(limits or ServerLimits(), **limit_options)  # a TypeError names an unknown option
    model = str(model_for(model=model))
    step_cache = check_step_cache(step_cache)
    check_for_backend(step_cache, "diffusers")
    scratch = None if storage_dir else tempfile.TemporaryDirectory(prefix="cosmos-vllm-server-")
    state = ServerState(backend=backend or DiffusersBackend(progress=False), model=model,
                        served_model_name=served_model_name or model, jobs=JobStore(Path(storage_dir or scratch.name)),
                        worker=SerialWorker(limits.max_queue), limits=limits, guardrails=guardrails,
                        sync_timeout=sync_timeout, step_progress=step_progress, transfer_runner=transfer_runner,
                        warmup=warmup, step_cache=step_cache)
    app = FastAPI(title="cosmos-helpers vLLM-Omni stand-in", version=VERSION, lifespan=_lifespan,
                  description=f"A local stand-in for vLLM-Omni {VERSION} serving Cosmos3. Errors use vLLM's "
                              'envelope {"error": {"message", "type", "param", "code"}}; bad input is a 400.')
    app.state.server = state
    app.state.scratch = scratch  # a folder of our own making goes when the app does (or at exit)
    install_error_handlers(app)
    app.add_middleware(Gates, key=api_key or None, max_request_bytes=limits.max_request_bytes,
                       max_json_bytes=limits.max_field_bytes)
    app.include_router(router, form_limits={"max_part_size": limits.max_field_bytes,  # a video POST uses two files
                                            "max_files": 8, "max_fields": 256})
    return app


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI):
    state: ServerState = app.state.server
    if state.warmup and hasattr(state.backend, "pipeline"):
        await run_in_threadpool(state.backend.pipeline, state.model)
    state.worker.start()
    await run_in_threadpool(state.jobs.sweep, state.limits.job_ttl)  # an earlier server's leftovers (TTL 0: none)
    janitor = asyncio.create_task(_janitor(state))
    try:
        yield
    finally:
        janitor.cancel()
        state.worker.stop()
        if app.state.scratch is not None:  # the folder this app made for itself; a given one stays
            app.state.scratch.cleanup()


async def _janitor(state: ServerState) -> None:
    """Expire finished jobs (record, file, uploads) every quarter TTL, at most every minute (TTL 0: never)."""
    interval = min(max(state.limits.job_ttl / 4, 0.25), 60.0)
    while state.limits.job_ttl > 0:
        await asyncio.sleep(interval)
        with contextlib.suppress(Exception):  # a sweep must never take the server down; the next one retries
            await run_in_threadpool(state.jobs.sweep, state.limits.job_ttl)


@dataclass
class Gates:
    """vLLM's ``--api-key`` when ``key`` is set (``Authorization: Bearer <key>`` on ``/v1/*``, compared in constant
    time), then the body limit: 413 above ``max_request_bytes`` (the image route: ``max_json_bytes``)."""

    app: ASGIApp
    key: str | None
    max_request_bytes: int
    max_json_bytes: int

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers", ()))
        if scope["type"] == "http" and self.key and scope["path"].startswith("/v1"):
            header = headers.get(b"authorization", b"")
            token = header[7:] if header[:7].lower() == b"bearer " else b""
            if not hmac.compare_digest(token, self.key.encode()):
                return await envelope(401, "Unauthorized: missing or wrong API key")(scope, receive, send)
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE"):
            return await self.app(scope, receive, send)
        limit = self.max_json_bytes if scope.get("path") == IMAGES else self.max_request_bytes
        too_large = ApiError(413, f"The request body is larger than the limit of {limit} bytes")
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            return await envelope(413, too_large.message, headers={"Connection": "close"})(scope, receive, send)
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
