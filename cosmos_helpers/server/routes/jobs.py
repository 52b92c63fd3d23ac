"""Asynchronous video jobs (api_server.py:2632-2950): create, list, retrieve, download, delete.

A failed job answers ``GET`` with its failure code and the job as the body; its content is a 422; a job not
finished yet has no content (404). ``DELETE`` stops a queued job at once and a running one at its next step,
waiting at most vLLM's abort budget (4 s) before a 409.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, JSONResponse

from ...protocol.vllm_omni import VIDEOS
from .. import execute
from ..errors import ApiError
from ..jobs import Job, new_job_id, new_record
from ..models import VideoDeleted, VideoError, VideoJob, VideoList
from ..state import ServerState, State
from ..translate import VideoTask
from ..worker import Cancelled, TaskContext
from . import ERRORS
from .videos import VideoFormBody, parse_video

router = APIRouter(tags=["video jobs"])
DELETE_WAIT_S = 4.0  # VLLM_OMNI_ABORT_TIMEOUT (2 s) + 2 s of scheduling slack


@router.post(VIDEOS, response_model=VideoJob, responses=ERRORS)
async def create_video(request: Request, form: VideoFormBody, state: State) -> VideoJob:
    job_id = new_job_id()
    task = await parse_video(request, form, state, job_id)
    job = state.jobs.add(Job(new_record(job_id, state.served_model_name, task.request), uploads=task.uploads.paths))

    def on_progress(step: int, total: int) -> None:
        if state.step_progress and total:
            state.jobs.update(job_id, progress=min(99, int(100 * step / total)))

    try:
        job.future = state.submit(job_id, lambda ctx: run_job(state, job, task, ctx), cleanup=task.uploads,
                                  on_progress=on_progress)
    except ApiError:
        state.jobs.remove(job_id)
        raise
    job.future.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved, never raised
    return job.record


def run_job(state: ServerState, job: Job, task: VideoTask, ctx: TaskContext) -> None:
    """The job in the worker thread: in progress, then completed with its file, or failed with its error."""
    job_id = job.record.id
    started = time.time()
    state.jobs.update(job_id, status="in_progress", started_ts=started)
    target = state.jobs.path_for(job_id)
    try:
        result = execute.run_video(task, state.backend, target, ctx, state.transfer_runner)
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
    if task.metrics:
        metrics = {"stage_durations": result.stage_durations, "peak_memory_mb": result.peak_memory_mb,
                   "queue_s": round(started - job.created_ts, 4), "started_at": started, "finished_at": now}
    state.jobs.update(job_id, status="completed", progress=100, file_name=target.name, completed_at=int(now),
                      finished_ts=now, expires_at=state.expires(now), inference_time_s=result.inference_time_s,
                      fps=result.fps, num_frames=result.num_frames, duration_s=result.num_frames / result.fps,
                      stage_durations=result.stage_durations, peak_memory_mb=result.peak_memory_mb, metrics=metrics)


@router.get(VIDEOS, response_model=VideoList, responses=ERRORS)
async def list_videos(state: State, after: str | None = None,
                      limit: Annotated[int | None, Query(ge=0, le=100)] = None,
                      order: Literal["asc", "desc"] = "desc") -> VideoList:
    return state.jobs.page(after=after, limit=limit, order=order)


def _job(state: ServerState, video_id: str) -> Job:
    job = state.jobs.get(video_id)
    if job is None:
        raise ApiError(404, "Video not found")
    return job


@router.get(VIDEOS + "/{video_id}", response_model=VideoJob, responses=ERRORS)
async def retrieve_video(video_id: str, state: State):
    record = _job(state, video_id).record
    if record.status == "failed":
        code = record.error.code if record.error else None
        status = code if isinstance(code, int) and 400 <= code < 600 else 500
        return JSONResponse(record.model_dump(mode="json"), status_code=status)
    return record


@router.get(VIDEOS + "/{video_id}/content", response_class=FileResponse,
            responses={200: {"content": {"video/mp4": {}}}, **ERRORS})
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


@router.delete(VIDEOS + "/{video_id}", response_model=VideoDeleted, responses=ERRORS)
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
    state.jobs.path_for(video_id).unlink(missing_ok=True)  # a cancelled or failed job may have left a partial file
    state.jobs.remove(video_id)
    for path in job.uploads:
        path.unlink(missing_ok=True)
    return VideoDeleted(id=video_id)
