"""``POST /v1/videos/sync``: the MP4 in the answer, with vLLM's ``X-*`` headers; the timeout counts queueing.

``parse_video`` is shared with the job route: the form (FastAPI's form model) becomes the typed request, the
uploads are read, and the work is described before anything is queued.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ...protocol.vllm_omni import VIDEO_FILES, VIDEOS_SYNC
from .. import execute, translate
from ..models import VIDEO_EXAMPLES, VideoForm
from ..state import ServerState, State, wait
from . import ERRORS

router = APIRouter(tags=["videos"])
VideoFormBody = Annotated[VideoForm, Form(media_type="multipart/form-data", openapi_examples=VIDEO_EXAMPLES)]


async def parse_video(request: Request, form: VideoForm, state: ServerState, stem: str) -> translate.VideoTask:
    """Everything checked and the media read, before the task is queued (429 first when the queue is full)."""
    if state.worker.full():
        raise state.busy()
    typed = form.to_request()
    files = {name: await upload.read() for name in VIDEO_FILES if (upload := getattr(form, name)) is not None}
    raw = await request.form()  # FastAPI's parse, cached: the text parts as sent, for a transfer runner
    fields = {name: value for name, value in raw.items() if isinstance(value, str) and value != ""}
    return await run_in_threadpool(translate.video_task, typed, files, fields, state, stem)


@router.post(VIDEOS_SYNC, response_class=Response, responses={200: {"content": {"video/mp4": {}}}, **ERRORS})
async def create_video_sync(request: Request, form: VideoFormBody, state: State) -> Response:
    deadline = time.monotonic() + state.sync_timeout
    key = uuid.uuid4().hex
    task = await parse_video(request, form, state, key)
    out = state.storage / "sync" / f"{key}.mp4"
    out.parent.mkdir(parents=True, exist_ok=True)
    future = state.submit(f"sync-{key}", lambda ctx: execute.run_video(task, state.backend, out, ctx,
                                                                       state.transfer_runner), cleanup=task.uploads)
    try:
        result = await wait(future, deadline - time.monotonic(), "Video generation", state.sync_timeout)
    except BaseException:  # a 504 or a cancelled handler: the work goes on, its file goes when it ends
        future.add_done_callback(lambda _done: out.unlink(missing_ok=True))
        raise
    try:
        content = result.path.read_bytes()
    finally:
        result.path.unlink(missing_ok=True)
    return Response(content, media_type="video/mp4", headers={
        "X-Request-Id": f"video_sync-{uuid.uuid4()}", "X-Model": state.served_model_name,
        "X-Inference-Time-S": f"{result.inference_time_s:.3f}",
        "X-Stage-Durations": json.dumps(result.stage_durations, separators=(",", ":")),
        "X-Peak-Memory-MB": f"{result.peak_memory_mb:.3f}"})
