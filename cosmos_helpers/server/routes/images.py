"""``POST /v1/images/generations``: a JSON body, base64 images or the raw file (a zip for ``n`` > 1)."""

from __future__ import annotations

import base64
import time
import uuid
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ...protocol.vllm_omni import IMAGES
from .. import execute, translate
from ..errors import bad_request
from ..models import IMAGE_EXAMPLES, ImageData, ImageRequest, ImageResponse
from ..state import State, wait
from . import ERRORS

router = APIRouter(tags=["images"])


def json_only(request: Request) -> None:
    """vLLM's ``validate_json_request``: the body must be declared JSON."""
    if "application/json" not in request.headers.get("content-type", "").lower():
        raise bad_request("Content-Type must be application/json")


@router.post(IMAGES, response_model=ImageResponse, responses=ERRORS, dependencies=[Depends(json_only)])
async def generate_images(body: Annotated[ImageRequest, Body(openapi_examples=IMAGE_EXAMPLES)], state: State):
    if state.worker.full():
        raise state.busy()
    task = await run_in_threadpool(translate.image_task, body, state)
    future = state.submit(f"image-{uuid.uuid4().hex}", lambda ctx: execute.run_images(task, state.backend, ctx))
    result = await wait(future, state.sync_timeout, "Image generation", state.sync_timeout)
    if task.response_format == "file":
        if len(result.images) == 1:
            content, media_type, name = result.images[0], result.media_type, f"image_{uuid.uuid4().hex[:8]}." \
                                                                               f"{task.output_format}"
        else:
            content = execute.zip_images(result.images, task.output_format)
            media_type, name = "application/zip", f"images_{uuid.uuid4().hex[:8]}.zip"
        return Response(content, media_type=media_type,
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})
    metrics = {"stage_durations": result.stage_durations or None, "peak_memory_mb": result.peak_memory_mb or None}
    if task.metrics:  # the detailed metrics come only with return_stage_metrics, as upstream
        metrics["inference_time_s"] = round(result.inference_time_s, 4)
    return ImageResponse(created=int(time.time()), output_format=task.output_format, size=result.size,
                         data=[ImageData(b64_json=base64.b64encode(data).decode()) for data in result.images],
                         metrics=metrics)
