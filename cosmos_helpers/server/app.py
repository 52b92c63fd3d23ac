"""A local server speaking the vLLM-Omni 0.30.0 protocol for Cosmos3, backed by the Diffusers backend.

``create_app(backend)`` builds the FastAPI app; ``cosmos-helpers serve`` runs it under uvicorn. Route
handlers stay thin: :mod:`.translate` turns fields into a request, :mod:`.execute` runs it in the
:class:`~.worker.SerialWorker` thread, :mod:`.jobs` keeps asynchronous job records. Every error uses
vLLM's envelope ``{"error": {"message", "type", "param", "code"}}`` with 400 (never 422) for bad input.

Hardening (:mod:`.limits`, all configurable): a request-body cap checked from ``Content-Length`` and while
streaming (413), a per-field cap (413), decoded-media, prompt and output limits (400), a bounded queue
(429 + ``Retry-After``), job ids validated before any file is touched (404), job files removed on
``DELETE`` and expired after ``job_ttl``, and server-local paths only under ``allowed_local_media_paths``.
The multipart and JSON bodies the handlers parse by hand are declared in the OpenAPI schema, so
schema-driven fuzzers (schemathesis) can generate them.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..presets import get_profile
from . import openapi as docs
from .execute import TransferRunner, run_images, run_video, zip_images
from .jobs import JobRecord, JobStore, new_job_id
from .limits import ServerLimits, valid_job_id
from .translate import ApiError, ServerSettings, Upload, parse_image_body, parse_video_form
from .worker import Cancelled, QueueFull, SerialWorker, TaskContext

MAX_PART_SIZE = 1024 * 1024  # Starlette's default text-part cap, as on the real server
DELETE_WAIT_S = 4.0


def create_app(
    backend: Any = None,
    *,
    api_key: str | None = None,
    served_model_name: str | None = None,
    model: str | None = None,
    profile: str = "tiny",
    storage_dir: str | Path | None = None,
    sync_timeout: float = 600.0,
    startup_delay: float = 0.0,
    guardrails: bool = True,
    block_words: tuple[str, ...] | list[str] = (),
    transfer_runner: TransferRunner | None = None,
    step_progress: bool = False,
    warmup: bool = True,
    limits: ServerLimits | None = None,
    **limit_options: Any,
) -> FastAPI:
    """The FastAPI app of the local vLLM-Omni-compatible server.

    Args:
        backend: what runs generations (``generate(request, progress=cb) -> Generation``); default a
            ``DiffusersBackend`` for ``model`` (or the profile's model).
        api_key: require ``Authorization: Bearer <key>`` on ``/v1/*``.
        served_model_name: the name clients must send as ``model`` (default: the model argument).
        profile: the defaults for omitted fields (``tiny`` shrinks sizes; ``nano``/``super`` are vLLM's).
        storage_dir: where job files and uploads go (default: a fresh temporary folder).
        sync_timeout: seconds before ``/v1/videos/sync`` answers 504; queueing time counts.
        startup_delay: extra seconds of "model loading" before the app starts serving.
        guardrails / block_words: the stand-in guardrail, a prompt containing a block word is rejected
            with 400 ``Input was blocked by Cosmos3 guardrails.`` unless the request sets
            ``extra_params.guardrails`` to a falsy value.
        transfer_runner: ``(form_fields, extra_params, rgb_video_path, control_paths) -> Generation``;
            without it transfer requests get 400 ``transfer is not enabled on this server``.
        step_progress: report per-step job progress (vLLM-Omni itself jumps from 0 to 100).
        warmup: load the model before serving (like the real server, which loads before binding).
        limits: a :class:`~.limits.ServerLimits`; ``limit_options`` override single fields of it, e.g.
            ``create_app(max_queue=4, job_ttl=600, allowed_local_media_paths=["/data/media"])``.
    """
    limits = limits or ServerLimits()
    if limit_options:
        from dataclasses import replace

        limits = replace(limits, **limit_options)  # TypeError names an unknown option
    prof = get_profile(profile)
    if backend is None:
        from ..backends.diffusers import DiffusersBackend

        backend = DiffusersBackend(model or prof.model, progress=False)
    model_arg = str(model or getattr(backend, "model", None) or prof.model)
    served = served_model_name or model_arg
    storage = Path(storage_dir) if storage_dir else Path(tempfile.mkdtemp(prefix="cosmos-vllm-server-"))
    store = JobStore(storage)
    worker = SerialWorker(max_queue=limits.max_queue)
    settings = ServerSettings(profile=prof, served_model_name=served, model_arg=model_arg,
                              upload_dir=storage / "uploads", guardrails=guardrails,
                              block_words=tuple(block_words), transfer_enabled=transfer_runner is not None,
                              limits=limits)
    futures: dict[str, Any] = {}

    def sweep() -> list[str]:
        expired = store.sweep(limits.job_ttl)
        for job_id in expired:
            futures.pop(job_id, None)
        return expired

    async def janitor() -> None:
        interval = min(max(limits.job_ttl / 4, 0.25), 60.0)
        while True:
            await asyncio.sleep(interval)
            try:
                await run_in_threadpool(sweep)
            except Exception:  # a sweep must never take the server down; the next one retries
                pass

    async def lifespan(app: FastAPI):
        if warmup and hasattr(backend, "pipeline"):
            await run_in_threadpool(backend.pipeline, model_arg)
        if startup_delay > 0:
            await asyncio.sleep(startup_delay)
        worker.start()
        app.state.started_at = time.time()
        cleaner = asyncio.ensure_future(janitor()) if limits.job_ttl > 0 else None
        if cleaner is not None:
            await run_in_threadpool(sweep)  # leftovers of an earlier server on this storage folder
        yield
        if cleaner is not None:
            cleaner.cancel()
        worker.stop(timeout=2.0)

    app = FastAPI(title="cosmos-helpers vLLM-Omni-compatible server", lifespan=lifespan,
                  description=docs.DESCRIPTION)
    app.add_middleware(BodyLimit, limits=limits)
    app.state.backend = backend
    app.state.worker = worker
    app.state.jobs = store
    app.state.settings = settings
    app.state.futures = futures
    app.state.sync_timeout = sync_timeout
    app.state.limits = limits
    app.state.sweep = sweep

    def busy(waiting: int | None = None, retry_after: float | None = None) -> ApiError:
        waiting = worker.waiting if waiting is None else waiting
        seconds = math.ceil(retry_after if retry_after is not None else worker.retry_after())
        return ApiError(429, f"Server busy: {waiting} generations are already queued (limit {limits.max_queue}). "
                             f"Retry after {seconds} s.", type="Too Many Requests",
                        headers={"Retry-After": str(seconds)})

    def submit(key: str, task: Any, cleanup: list | tuple = (), **kwargs: Any):
        try:
            return worker.submit(key, task, **kwargs)
        except QueueFull as full:
            for path in cleanup:
                path.unlink(missing_ok=True)
            raise busy(full.waiting, full.retry_after) from None

    # errors --------------------------------------------------------------------------------------------

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError):
        return JSONResponse(exc.envelope(), status_code=exc.status, headers=exc.headers or None)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError):
        errors = exc.errors()
        lines = [f"  {'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in errors]
        param = ".".join(str(p) for p in errors[0].get("loc", ())) if errors else None
        noun = "error" if len(errors) == 1 else "errors"
        return JSONResponse(ApiError(400, f"{len(errors)} validation {noun}:\n" + "\n".join(lines),
                                     type="Bad Request", param=param).envelope(), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException):
        return JSONResponse(ApiError(exc.status_code, str(exc.detail)).envelope(), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception):
        return JSONResponse(ApiError(500, f"{type(exc).__name__}: {exc}").envelope(), status_code=500)

    @app.middleware("http")
    async def _auth(request: Request, call_next: Callable):
        if api_key and request.url.path.startswith("/v1"):
            header = request.headers.get("authorization", "")
            token = header[7:] if header.lower().startswith("bearer ") else ""
            if not hmac.compare_digest(token.encode(), api_key.encode()):
                return JSONResponse(ApiError(401, "Unauthorized: missing or wrong API key").envelope(),
                                    status_code=401)
        return await call_next(request)

    # health and models ---------------------------------------------------------------------------------

    @app.get("/health")
    async def health():
        if not worker.alive:
            return JSONResponse({"status": "unhealthy", "reason": "generation worker is not running"},
                                status_code=503)
        return {"status": "healthy"}

    @app.get("/v1/models")
    async def models():
        created = int(getattr(app.state, "started_at", time.time()))
        return {"object": "list", "data": [{
            "id": served, "object": "model", "created": created, "owned_by": "vllm", "root": model_arg,
            "parent": None, "max_model_len": None,
            "permission": [{"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission",
                            "created": created, "allow_create_engine": False, "allow_sampling": True,
                            "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                            "allow_fine_tuning": False, "organization": "*", "group": None, "is_blocking": False}],
        }]}

    # images ----------------------------------------------------------------------------------------------

    @app.post("/v1/images/generations", openapi_extra=docs.images_body(), responses=docs.ERRORS)
    async def images(request: Request):
        if "application/json" not in request.headers.get("content-type", ""):
            raise ApiError(400, "Content-Type must be application/json", type="Bad Request")
        if worker.full():
            raise busy()
        raw = await request.body()
        if len(raw) > limits.max_field_bytes:
            raise ApiError(413, f"The JSON body has {len(raw)} bytes, above the limit of {limits.max_field_bytes}",
                           type="Request Entity Too Large")
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, nesting bombs
            detail = exc if not isinstance(exc, RecursionError) else "nested too deeply"
            raise ApiError(400, f"1 validation error:\n  body: JSON decode error ({detail})", type="Bad Request",
                           param="body") from None
        spec = await run_in_threadpool(parse_image_body, body, settings)
        future = submit(f"image-{uuid.uuid4().hex}", lambda ctx: run_images(spec, backend, ctx, settings))
        result = await _await(future, sync_timeout, "Image generation")
        if spec.response_format == "file":
            if len(result.images) == 1:
                return Response(result.images[0], media_type=result.media_type)
            extension = result.media_type.split("/")[1]
            return Response(zip_images(result.images, extension), media_type="application/zip")
        import base64

        return {"created": int(time.time()),
                "data": [{"b64_json": base64.b64encode(data).decode(), "url": None, "revised_prompt": None}
                         for data in result.images],
                "output_format": spec.output_format, "size": result.size, "cot_output": None,
                "metrics": {"stage_durations": result.stage_durations, "peak_memory_mb": result.peak_memory_mb}}

    # video: sync ------------------------------------------------------------------------------------------

    @app.post("/v1/videos/sync", openapi_extra=docs.video_body(), responses=docs.ERRORS,
              response_class=Response)
    async def videos_sync(request: Request):
        deadline = time.monotonic() + sync_timeout
        if worker.full():
            raise busy()
        fields, files = await _read_form(request, limits)
        key = uuid.uuid4().hex
        spec = await run_in_threadpool(parse_video_form, fields, files, settings, key)
        out = storage / "sync" / f"{key}.mp4"
        out.parent.mkdir(parents=True, exist_ok=True)
        future = submit(f"sync-{key}", lambda ctx: run_video(spec, backend, out, ctx, settings, transfer_runner),
                        spec.uploads)
        try:
            result = await _await(future, max(0.0, deadline - time.monotonic()), "Video generation",
                                  total=sync_timeout)
        except ApiError as exc:
            if exc.status == 504:
                future.add_done_callback(lambda _f: out.unlink(missing_ok=True))
            raise
        try:
            content = result.path.read_bytes()
        finally:
            result.path.unlink(missing_ok=True)
        headers = {
            "X-Request-Id": f"video_sync-{uuid.uuid4()}",
            "X-Model": served,
            "X-Inference-Time-S": f"{result.inference_time_s:.3f}",
            "X-Stage-Durations": json.dumps(result.stage_durations, separators=(",", ":")),
            "X-Peak-Memory-MB": f"{result.peak_memory_mb:.3f}",
        }
        return Response(content, media_type="video/mp4", headers=headers)

    # video: async jobs -------------------------------------------------------------------------------------

    @app.post("/v1/videos", openapi_extra=docs.video_body(), responses=docs.ERRORS)
    async def videos_create(request: Request):
        if worker.full():
            raise busy()
        fields, files = await _read_form(request, limits)
        job_id = new_job_id()
        spec = await run_in_threadpool(parse_video_form, fields, files, settings, job_id)
        record = JobRecord(
            id=job_id, prompt=spec.prompt, model=served, size=spec.size_field, seconds=spec.seconds_field or "4",
            quality=spec.quality, fps=spec.fps, num_frames=spec.num_frames, uploads=list(spec.uploads))

        def task(ctx: TaskContext):
            store.update(job_id, status="in_progress", started_ts=time.time())
            target = store.path_for(job_id)
            try:
                result = run_video(spec, backend, target, ctx, settings, transfer_runner)
            except Cancelled:
                target.unlink(missing_ok=True)
                raise
            except ApiError as exc:
                now = time.time()
                store.update(job_id, status="failed", progress=0, finished_ts=now, expires_at=expires(now),
                             error={"code": exc.status, "message": exc.message})
                raise
            if ctx.cancel.is_set():
                target.unlink(missing_ok=True)
                raise Cancelled(job_id)
            now = time.time()
            current = store.get(job_id)
            queue_s = (current.started_ts - current.created_ts) if current and current.started_ts else None
            store.update(job_id, status="completed", progress=100, completed_at=int(now), finished_ts=now,
                         expires_at=expires(now),
                         file_name=target.name, fps=result.fps, num_frames=result.num_frames,
                         duration_s=result.duration_s, inference_time_s=round(result.inference_time_s, 3),
                         stage_durations=result.stage_durations, peak_memory_mb=result.peak_memory_mb,
                         metrics={"stage_durations": result.stage_durations, "peak_memory_mb": result.peak_memory_mb,
                                  "queue_s": None if queue_s is None else round(queue_s, 4),
                                  "started_at": current.started_ts if current else None, "finished_at": now})
            return result

        def on_progress(step: int, total: int) -> None:
            if step_progress and total:
                store.update(job_id, progress=min(99, int(100 * step / total)))

        store.add(record)
        try:
            future = submit(job_id, task, spec.uploads, on_progress=on_progress)
        except ApiError:
            store.remove(job_id)
            raise
        futures[job_id] = future
        future.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieve, never raise
        return record.to_dict()

    def expires(now: float) -> int | None:
        return int(now + limits.job_ttl) if limits.job_ttl else None

    @app.get("/v1/videos", openapi_extra=docs.LIST_PARAMETERS, responses=docs.ERRORS)
    async def videos_list(request: Request):
        params = request.query_params
        try:
            limit = int(params.get("limit", "20"))
        except ValueError:
            raise ApiError(400, "1 validation error:\n  query.limit: Input should be a valid integer",
                           type="Bad Request", param="query.limit") from None
        if not 0 <= limit <= 100:
            raise ApiError(400, f"1 validation error:\n  query.limit: Input should be between 0 and 100 "
                                f"[input={limit}]", type="Bad Request", param="query.limit")
        order = params.get("order", "desc")
        if order not in ("asc", "desc"):
            raise ApiError(400, f"1 validation error:\n  query.order: Input should be 'asc' or 'desc' "
                                f"[input={order!r}]", type="Bad Request", param="query.order")
        return store.page(after=params.get("after") or None, limit=limit, order=order)

    def _job_or_404(job_id: str) -> JobRecord:
        record = store.get(job_id) if valid_job_id(job_id) else None  # nothing else reaches the file store
        if record is None:
            raise ApiError(404, "Video not found")
        return record

    @app.get("/v1/videos/{job_id}", responses=docs.ERRORS)
    async def videos_retrieve(job_id: str):
        record = _job_or_404(job_id)
        body = record.to_dict()
        if record.status == "failed":
            code = (record.error or {}).get("code")
            status = code if isinstance(code, int) and 400 <= code <= 599 else 500
            return JSONResponse(body, status_code=status)
        return body

    @app.get("/v1/videos/{job_id}/content", responses=docs.ERRORS, response_class=Response)
    async def videos_content(job_id: str):
        record = _job_or_404(job_id)
        if record.status == "failed":
            raise ApiError(422, "Video generation failed. Check job status for error details.")
        if record.status != "completed":
            raise ApiError(404, "Generation is still in-progress")
        path = store.path_for(job_id)
        if not record.file_name or not path.is_file():
            raise ApiError(404, "Video file not found")
        return FileResponse(path, media_type="video/mp4", filename=f"{job_id}.mp4")

    @app.delete("/v1/videos/{job_id}", responses=docs.ERRORS)
    async def videos_delete(job_id: str):
        record = _job_or_404(job_id)
        if record.status in ("queued", "in_progress"):
            outcome = worker.cancel(job_id)
            future = futures.get(job_id)
            if outcome == "signalled" and future is not None:
                deadline = time.monotonic() + DELETE_WAIT_S
                while not future.done() and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                if not future.done():
                    raise ApiError(409, "Cancellation in progress; the job stops at its next step. Retry the delete.")
        elif record.status == "completed":
            if not record.file_name:
                raise ApiError(409, "The job has no file yet; retry the delete.")
        store.path_for(job_id).unlink(missing_ok=True)  # a cancelled or failed job may have left a partial file
        store.remove(job_id)
        futures.pop(job_id, None)
        for path in record.uploads:
            path.unlink(missing_ok=True)
        return {"id": job_id, "deleted": True, "object": "video.deleted"}

    return app


async def _await(future, timeout: float, what: str, total: float | None = None):
    """Wait for a worker future without cancelling it (a client giving up does not stop the GPU work)."""
    try:
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout=max(timeout, 0.001))
    except asyncio.TimeoutError:
        raise ApiError(504, f"{what} timed out after {float(total if total is not None else timeout):.1f}s") from None


async def _read_form(request: Request, limits: ServerLimits | None = None
                     ) -> tuple[dict[str, str], dict[str, Upload]]:
    """Multipart (or url-encoded) fields as strings, files as bytes; malformed bodies are a 400, a field
    over ``max_field_bytes`` (or a body over ``max_request_bytes``) a 413."""
    limits = limits or ServerLimits()
    content_type = request.headers.get("content-type", "").lower()
    if not content_type.startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
        raise ApiError(400, "Content-Type must be multipart/form-data", type="Bad Request")
    try:
        form = await request.form(max_part_size=limits.max_field_bytes, max_files=8, max_fields=256)
    except ApiError:
        raise  # the body limit, raised while streaming
    except Exception as exc:  # MultiPartException / HTTPException from Starlette's parser
        detail = getattr(exc, "detail", None) or getattr(exc, "message", None) or str(exc)
        if "exceeded maximum size" in str(detail):
            raise ApiError(413, f"A form field is larger than the limit of {limits.max_field_bytes} bytes "
                                f"({detail})", type="Request Entity Too Large") from None
        raise ApiError(400, f"Invalid multipart body: {detail}", type="Bad Request") from None
    fields: dict[str, str] = {}
    files: dict[str, Upload] = {}
    for name, value in form.multi_items():
        if isinstance(value, str):
            if "\x00" in value:
                raise ApiError(400, f"1 validation error:\n  body.{name[:64]}: NUL characters are not allowed",
                               type="Bad Request", param=f"body.{name[:64]}")
            fields.setdefault(name, value)
        elif name not in files:
            files[name] = Upload(filename=value.filename or "", content=await value.read())
    await form.close()
    return fields, files


class BodyLimit:
    """ASGI middleware: refuse bodies above the limit, from ``Content-Length`` at once or while streaming
    (413 in vLLM's envelope); the JSON image route gets the per-field limit."""

    def __init__(self, app: Any, limits: ServerLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        limit = self.limits.max_request_bytes
        if scope.get("path") == "/v1/images/generations":
            limit = self.limits.max_field_bytes
        declared = None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = None
        too_large = ApiError(413, f"The request body is larger than the limit of {limit} bytes",
                             type="Request Entity Too Large")
        if declared is not None and declared > limit:
            response = JSONResponse(too_large.envelope(), status_code=413, headers={"Connection": "close"})
            await response(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> dict:
            nonlocal received
            message = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise too_large
            return message

        await self.app(scope, limited_receive, send)
