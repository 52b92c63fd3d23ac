"""Running a task in the worker thread and producing what vLLM-Omni returns: the MP4 (the backend's own finished
file as it is, else the frames encoded once, with vLLM's encoder settings) or the encoded images."""

from __future__ import annotations

import io
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import media
from ..errors import GuardrailError
from ..protocol.vllm_omni import GUARDRAIL_MESSAGE, VIDEO_ENCODER
from .errors import ApiError
from .state import TransferRunner
from .translate import ImageTask, VideoTask
from .worker import Cancelled, TaskContext

IMAGE_FORMATS = {"png": ("PNG", "image/png"), "jpeg": ("JPEG", "image/jpeg"), "jpg": ("JPEG", "image/jpeg"),
                 "webp": ("WEBP", "image/webp")}


@dataclass
class VideoResult:
    path: Path
    fps: float
    num_frames: int
    inference_time_s: float
    stage_durations: dict[str, float] = field(default_factory=dict)
    peak_memory_mb: float = 0.0


@dataclass
class ImageResult:
    images: list[bytes]
    size: str
    media_type: str
    inference_time_s: float
    stage_durations: dict[str, float] = field(default_factory=dict)
    peak_memory_mb: float = 0.0


def run_video(task: VideoTask, backend: Any, out: Path, ctx: TaskContext,
              transfer_runner: TransferRunner | None) -> VideoResult:
    """Generate (or transfer) into ``out``; every failure becomes the ``ApiError`` the client gets."""
    started = time.perf_counter()
    try:
        if task.transfer is not None:
            inputs = task.transfer
            generation = transfer_runner(dict(inputs.form_fields), dict(inputs.extra_params), inputs.rgb_video_path,
                                         dict(inputs.control_paths))
        else:
            generation = backend.generate(task.generation, progress=ctx.progress)
        ctx.progress(0, 0)  # a last cancellation check before the file is written
        encode_start = time.perf_counter()
        publish(generation, out)
        stages = {**_stages(generation.timings), "encode": round(time.perf_counter() - encode_start, 4)}
        return VideoResult(path=out, fps=float(generation.fps), num_frames=int(generation.frames.shape[0]),
                           inference_time_s=time.perf_counter() - started, stage_durations=stages,
                           peak_memory_mb=_peak_memory_mb())
    except (ApiError, Cancelled):
        raise
    except Exception as exc:
        raise failure(exc, "Video generation") from exc
    finally:
        task.uploads.discard()


def publish(generation: Any, out: Path) -> None:
    """The backend's finished MP4 byte for byte, else the frames encoded once (H.264 ``ultrafast``, crf 18)."""
    finished = getattr(generation, "finished", None)
    if finished is not None and finished.suffix == ".mp4":
        finished.publish(out, overwrite=True)
        return
    media.write_mp4(out, generation.frames, generation.fps, sound=generation.sound,
                    sample_rate=generation.sample_rate, crf=VIDEO_ENCODER["crf"], preset=VIDEO_ENCODER["preset"],
                    overwrite=True)


def run_images(task: ImageTask, backend: Any, ctx: TaskContext) -> ImageResult:
    """``n`` images one after another (seeds ``seed, seed+1, ...``), encoded as asked."""
    pil_format, media_type = IMAGE_FORMATS[task.output_format]
    started = time.perf_counter()
    try:
        images: list[bytes] = []
        first = None
        for index in range(task.n):
            request = task.request if index == 0 else task.request.replace(seed=task.request.seed + index)
            generation = backend.generate(request, progress=ctx.progress)
            if first is None:
                first = generation
            images.append(media.image_bytes(generation.frames[0], pil_format, quality=task.output_compression))
        return ImageResult(images=images, size=f"{first.width}x{first.height}", media_type=media_type,
                           inference_time_s=time.perf_counter() - started, stage_durations=_stages(first.timings),
                           peak_memory_mb=_peak_memory_mb())
    except (ApiError, Cancelled):
        raise
    except Exception as exc:
        raise failure(exc, "Image generation", value_error_status=400) from exc


def zip_images(images: list[bytes], extension: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for index, data in enumerate(images):
            archive.writestr(f"image_{index}.{extension}", data)
    return buffer.getvalue()


def failure(exc: Exception, what: str, *, value_error_status: int = 500) -> ApiError:
    """vLLM-Omni's answer to a failure during generation: the guardrail's 400, else ``"<what> failed: ..."``
    (a ``ValueError`` is a 400 on the image route, a 500 on the video routes)."""
    if isinstance(exc, GuardrailError):
        return ApiError(400, GUARDRAIL_MESSAGE)
    status = value_error_status if isinstance(exc, ValueError) else 500
    return ApiError(status, f"{what} failed: {exc}")


def _stages(timings: dict[str, float]) -> dict[str, float]:
    names = {"load_s": "load", "denoise_s": "denoise", "decode_s": "vae_decode"}
    return {names[key]: round(float(value), 4) for key, value in timings.items() if key in names}


def _peak_memory_mb() -> float:
    torch = sys.modules.get("torch")  # only when a backend already uses it
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return 0.0
