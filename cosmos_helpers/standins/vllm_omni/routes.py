"""The routes of the stand-in (one router), as vLLM-Omni's api_server.py:1937-2950 answers them. The sync timeout
counts queueing; a timed-out or abandoned wait never cancels work already running, as on vLLM-Omni.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import sys
import time
import uuid
import zipfile
from concurrent.futures import Future
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Iterator, Literal

from fastapi import APIRouter, Body, Depends, Form, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from ... import media
from ...errors import GuardrailError
from ...protocol.vllm_omni import (GUARDRAIL_MESSAGE, HEALTH, IMAGES, MODELS, VIDEO_ENCODER, VIDEO_FILES, VIDEOS,
                                   VIDEOS_SYNC)
from .. import MODEL_CARD_KEY
from . import action_task, translate
from .models import (IMAGE_EXAMPLES, VIDEO_EXAMPLES, ApiError, ErrorEnvelope, ImageData, ImageRequest,
                     ImageResponse, VideoDeleted, VideoError, VideoForm, VideoJob, VideoList, bad_request)
from .references import TransferRunner
from .state import Cancelled, Job, ServerState, State, TaskContext, new_record
from .translate import ImageTask, VideoTask

router = APIRouter()
DELETE_WAIT_S = 4.0  # VLLM_OMNI_ABORT_TIMEOUT (2 s) + 2 s of scheduling slack

ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorEnvelope, "description": text} for code, text in {
    400: "Bad input (validation, a guardrail block, a refused option)", 401: "Missing or wrong API key",
    404: "Unknown job (or malformed id), or its file is not ready", 413: "Request body too large",
    429: "Queue full; retry after Retry-After seconds (a stand-in feature)", 500: "Generation failed",
    504: "Synchronous generation timed out (queueing included)", "4XX": "Any other client error"}.items()}
MP4: dict[int | str, dict[str, Any]] = {200: {"content": {"video/mp4": {}}}, **ERRORS}
JOBS = ["video jobs"]


async def wait(future: Future, timeout: float, what: str, total: float) -> Any:
    """The task's result within ``timeout`` (a 504 names the ``total`` allowed); the work itself goes on."""
    try:
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout=max(timeout, 0.001))
    except asyncio.TimeoutError:
        raise ApiError(504, f"{what} timed out after {float(total)}s.") from None


@router.get(HEALTH, tags=["health"])
async def health(state: State):
    if not state.worker.alive:
        return JSONResponse({"status": "unhealthy", "reason": "the generation worker is not running"},
                            status_code=503)
    return {"status": "healthy"}


@router.get(MODELS, tags=["health"])
async def models(state: State):
    created = int(state.started_at)
    permission = {"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission", "created": created,
                  "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                  "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                  "organization": "*", "group": None, "is_blocking": False}
    return {"object": "list", "data": [{"id": state.served_model_name, "object": "model", "created": created,
                                        "owned_by": "vllm", "root": state.model, "parent": None,
                                        "max_model_len": None, "permission": [permission],
                                        MODEL_CARD_KEY: state.standin_record()}]}


def json_only(request: Request) -> None:
    """vLLM's ``validate_json_request``: the body must be declared JSON."""
    if "application/json" not in request.headers.get("content-type", "").lower():
        raise bad_request("Content-Type must be application/json")


@router.post(IMAGES, tags=["images"], response_model=ImageResponse, responses=ERRORS,
             dependencies=[Depends(json_only)])
async def generate_images(body: Annotated[ImageRequest, Body(openapi_examples=IMAGE_EXAMPLES)], state: State):
    state.worker.admit()
    task = await run_in_threadpool(translate.image_task, body, state)
    future = state.submit(f"image-{uuid.uuid4().hex}", lambda ctx: run_images(task, state.backend, ctx.progress))
    result = await wait(future, state.sync_timeout, "Image generation", state.sync_timeout)
    if task.body.response_format == "file":
        name = f"image_{uuid.uuid4().hex[:8]}.{task.output_format}"
        content, media_type = result.images[0], f"image/{task.output_format.replace('jpg', 'jpeg')}"
        if len(result.images) > 1:
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
                for index, data in enumerate(result.images):
                    archive.writestr(f"image_{index}.{task.output_format}", data)
            content, media_type, name = buffer.getvalue(), "application/zip", f"images_{uuid.uuid4().hex[:8]}.zip"
        return Response(content, media_type=media_type,
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})
    metrics = {"stage_durations": result.stage_durations or None, "peak_memory_mb": result.peak_memory_mb or None}
    if task.body.return_stage_metrics:  # the detailed metrics come only with return_stage_metrics, as upstream
        metrics["inference_time_s"] = round(result.inference_time_s, 4)
    size = f"{result.generation.width}x{result.generation.height}"
    return ImageResponse(created=int(time.time()), output_format=task.output_format, size=size,
                         data=[ImageData(b64_json=base64.b64encode(data).decode()) for data in result.images],
                         metrics=metrics)


VideoFormBody = Annotated[VideoForm, Form(media_type="multipart/form-data", openapi_examples=VIDEO_EXAMPLES)]


async def parse_video(request: Request, form: VideoForm, state: ServerState, stem: str) -> translate.VideoTask:
    """Everything checked and the media read before the task is queued (429 first when the queue is full)."""
    state.worker.admit()
    typed = form.to_request()
    files = {name: await upload.read() for name in VIDEO_FILES if (upload := getattr(form, name)) is not None}
    raw = await request.form()  # FastAPI's parse, cached: the text parts as sent, for a transfer runner
    fields = {name: value for name, value in raw.items() if isinstance(value, str) and value != ""}
    return await run_in_threadpool(translate.video_task, typed, files, fields, state, stem)


@router.post(VIDEOS_SYNC, tags=["videos"], response_class=Response, responses=MP4)
async def create_video_sync(request: Request, form: VideoFormBody, state: State) -> Response:
    deadline = time.monotonic() + state.sync_timeout
    key = uuid.uuid4().hex
    task = await parse_video(request, form, state, key)
    out = state.storage / "sync" / f"{key}.mp4"
    out.parent.mkdir(parents=True, exist_ok=True)
    future = state.submit(f"sync-{key}", lambda ctx: run_video(task, state.backend, out, ctx.progress,
                                                                       state.transfer_runner), task.uploads)
    try:
        result = await wait(future, deadline - time.monotonic(), "Video generation", state.sync_timeout)
    except BaseException:  # a 504 or a cancelled handler: the work goes on, its file goes when it ends
        future.add_done_callback(lambda _done: out.unlink(missing_ok=True))
        raise
    try:
        content = out.read_bytes()
    finally:
        out.unlink(missing_ok=True)
    return Response(content, media_type="video/mp4", headers={
        "X-Request-Id": f"video_sync-{uuid.uuid4()}", "X-Model": state.served_model_name,
        "X-Inference-Time-S": f"{result.inference_time_s:.3f}",
        "X-Stage-Durations": json.dumps(result.stage_durations, separators=(",", ":")),
        "X-Peak-Memory-MB": f"{result.peak_memory_mb:.3f}"})


@router.post(VIDEOS, tags=JOBS, response_model=VideoJob, responses=ERRORS)
async def create_video(request: Request, form: VideoFormBody, state: State) -> VideoJob:
    job_id = f"video_gen_{uuid.uuid4().hex}"  # protocol JOB_ID
    task = await parse_video(request, form, state, job_id)
    job = state.jobs.add(Job(new_record(job_id, state.served_model_name, task.request), uploads=task.uploads.paths))
    queued = job.record.model_copy()  # the answer is the record as queued, whatever the worker has done since
    job.future = state.submit(job_id, lambda ctx: run_job(state, job, task, ctx), task.uploads)
    job.future.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved, never raised
    return queued


def run_job(state: ServerState, job: Job, task: VideoTask, ctx: TaskContext) -> None:
    job_id = job.record.id
    started = time.time()
    state.jobs.update(job_id, status="in_progress")
    target = state.jobs.path_for(job_id)

    def progress(step: int, total: int) -> None:
        ctx.progress(step, total)
        if state.step_progress and total:
            state.jobs.update(job_id, progress=min(99, int(100 * step / total)))
    try:
        result = run_video(task, state.backend, target, progress, state.transfer_runner)
    except Cancelled:
        target.unlink(missing_ok=True)
        raise
    except ApiError as error:
        now = time.time()
        cause = error.__cause__  # vLLM keeps the exception's own text in the job
        message = str(cause) if error.status_code == 500 and cause is not None else error.message
        state.jobs.update(job_id, status="failed", completed_at=int(now), finished_ts=now,
                          inference_time_s=now - started, error=VideoError(code=error.status_code, message=message))
        raise
    now = time.time()
    metrics = None  # vLLM-Omni fills them only for return_stage_metrics
    if task.request.return_stage_metrics:
        metrics = {"stage_durations": result.stage_durations, "peak_memory_mb": result.peak_memory_mb,
                   "queue_s": round(started - job.created_ts, 4), "started_at": started, "finished_at": now}
    fps, num_frames, ttl = float(result.generation.fps), int(result.generation.frames.shape[0]), state.limits.job_ttl
    state.jobs.update(job_id, status="completed", progress=100, file_name=target.name, completed_at=int(now),
                      finished_ts=now, expires_at=int(now + ttl) if ttl else None, fps=fps, num_frames=num_frames,
                      duration_s=num_frames / fps, inference_time_s=result.inference_time_s,
                      stage_durations=result.stage_durations, peak_memory_mb=result.peak_memory_mb, metrics=metrics,
                      action=action_task.video_action(task.generation, result.generation.actions))


@router.get(VIDEOS, tags=JOBS, response_model=VideoList, responses=ERRORS)
async def list_videos(state: State, after: str | None = None,
                      limit: Annotated[int | None, Query(ge=0, le=100)] = None,
                      order: Literal["asc", "desc"] = "desc") -> VideoList:
    return state.jobs.page(after=after, limit=limit, order=order)


def _job(state: ServerState, video_id: str) -> Job:
    job = state.jobs.get(video_id)
    if job is None:
        raise ApiError(404, "Video not found")
    return job


@router.get(VIDEOS + "/{video_id}", tags=JOBS, response_model=VideoJob, responses=ERRORS)
async def retrieve_video(video_id: str, state: State):
    record = _job(state, video_id).record
    if record.status == "failed":
        code = record.error.code if record.error else None
        status = code if isinstance(code, int) and 400 <= code < 600 else 500
        return JSONResponse(record.model_dump(mode="json"), status_code=status)
    return record


@router.get(VIDEOS + "/{video_id}/content", tags=JOBS, response_class=FileResponse, responses=MP4)
async def download_video(video_id: str, state: State) -> FileResponse:
    record = _job(state, video_id).record
    if record.status == "failed":
        raise ApiError(422, "Video generation failed. Check job status for error details.")
    if not record.file_name:
        raise ApiError(404, "Generation is still in-progress")
    path = state.jobs.path_for(video_id)
    if not path.is_file():
        raise ApiError(404, "Generated video file not found on disk")
    return FileResponse(path, media_type="video/mp4", filename=record.file_name)


@router.delete(VIDEOS + "/{video_id}", tags=JOBS, response_model=VideoDeleted, responses=ERRORS)
async def delete_video(video_id: str, state: State) -> VideoDeleted:
    job = _job(state, video_id)
    if job.record.status in ("queued", "in_progress"):
        state.worker.cancel(video_id)
        if job.future is not None and not job.future.done():
            done, _ = await asyncio.wait({asyncio.wrap_future(job.future)}, timeout=DELETE_WAIT_S)
            if not done:
                raise ApiError(409, "Cancellation in progress. Please try again later.")
            for ended in done:  # cancelled or failed: that ending is what we waited for
                ended.cancelled() or ended.exception()
    elif job.record.status == "completed" and not job.record.file_name:
        raise ApiError(409, "Video output not yet available. Please try again later.")
    state.jobs.remove(video_id)
    for path in (state.jobs.path_for(video_id), *job.uploads):  # a cancelled or failed job may leave a partial file
        path.unlink(missing_ok=True)
    return VideoDeleted(id=video_id)


@dataclass
class Result:
    generation: Any  # the (first) Generation
    inference_time_s: float
    stage_durations: dict[str, float]
    peak_memory_mb: float
    images: tuple[bytes, ...] = ()  # an image request's, encoded


def run_video(task: VideoTask, backend: Any, out: Path, progress: Callable[[int, int], None],
              transfer_runner: TransferRunner | None) -> Result:
    """Generate (or transfer) into ``out``; every failure becomes the ``ApiError`` the client gets."""
    started = time.perf_counter()
    try:
        with _answered("Video generation"):
            if task.transfer is not None:
                generation = transfer_runner(*astuple(task.transfer))  # copies: the runner may change them
            else:
                generation = backend.generate(task.generation, progress=progress)
            progress(0, 0)  # a last cancellation check before the file is written
            encode_start = time.perf_counter()
            finished = getattr(generation, "finished", None)  # the backend's MP4 as it is, else frames encoded once
            if finished is not None and finished.suffix == ".mp4":
                finished.publish(out, overwrite=True)
            else:
                media.write_mp4(out, generation.frames, generation.fps, sound=generation.sound,
                                sample_rate=generation.sample_rate, crf=VIDEO_ENCODER["crf"],
                                preset=VIDEO_ENCODER["preset"], overwrite=True)
            stages = {**_stages(generation.timings), "encode": round(time.perf_counter() - encode_start, 4)}
            return Result(generation, time.perf_counter() - started, stages, _peak_memory_mb())
    finally:
        task.uploads.discard()


def run_images(task: ImageTask, backend: Any, progress: Callable[[int, int], None]) -> Result:
    pil_format = {"jpg": "JPEG"}.get(task.output_format, task.output_format.upper())
    started = time.perf_counter()
    with _answered("Image generation", value_error_status=400):
        generations = [backend.generate(task.request.replace(seed=task.request.seed + index) if index else
                                        task.request, progress=progress) for index in range(task.body.n)]
        images = tuple(media.image_bytes(g.frames[0], pil_format, quality=task.body.output_compression)
                       for g in generations)
        return Result(generations[0], time.perf_counter() - started, _stages(generations[0].timings),
                      _peak_memory_mb(), images)


@contextlib.contextmanager
def _answered(what: str, *, value_error_status: int = 500) -> Iterator[None]:
    """vLLM-Omni's answer to a failure during generation: the guardrail's 400, else ``"<what> failed: ..."``
    (a ``ValueError`` is a 400 on the image route, a 500 on the video routes)."""
    try:
        yield
    except (ApiError, Cancelled):
        raise
    except GuardrailError as exc:
        raise ApiError(400, GUARDRAIL_MESSAGE) from exc
    except Exception as exc:
        raise ApiError(value_error_status if isinstance(exc, ValueError) else 500, f"{what} failed: {exc}") from exc


def _stages(timings: dict[str, float]) -> dict[str, float]:
    names = {"load_s": "load", "denoise_s": "denoise", "decode_s": "vae_decode"}
    return {names[key]: round(float(value), 4) for key, value in timings.items() if key in names}


def _peak_memory_mb() -> float:
    torch = sys.modules.get("torch")  # only when a backend already uses it
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return 0.0
