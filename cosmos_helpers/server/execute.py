"""Running a parsed request on the backend, inside the worker thread, and encoding what vLLM-Omni returns."""

from __future__ import annotations

import io
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import media
from ..errors import GuardrailError
from .translate import GUARDRAIL_MESSAGE, ApiError, ImageSpec, ServerSettings, VideoSpec, blocked
from .worker import Cancelled, TaskContext

# vLLM-Omni's default encoder options are {"preset": "ultrafast"} (protocol §7.1, encoder keys).
ENCODER = {"preset": "ultrafast", "crf": 18}

TransferRunner = Callable[[dict, dict, "Path | None", "dict[str, Path]"], Any]


@dataclass
class VideoResult:
    path: Path
    fps: float
    num_frames: int
    duration_s: float
    inference_time_s: float
    stage_durations: dict[str, float] = field(default_factory=dict)
    peak_memory_mb: float = 0.0
    has_sound: bool = False


@dataclass
class ImageResult:
    images: list[bytes]
    size: str
    media_type: str
    inference_time_s: float
    stage_durations: dict[str, float] = field(default_factory=dict)
    peak_memory_mb: float = 0.0


def _peak_memory_mb() -> float:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.max_memory_allocated() / 2**20
    except ImportError:
        pass
    return 0.0


def _stages(timings: dict[str, float]) -> dict[str, float]:
    names = {"load_s": "load", "denoise_s": "denoise", "decode_s": "vae_decode"}
    return {names[k]: round(float(v), 4) for k, v in timings.items() if k in names}


def _failure(exc: BaseException, what: str) -> ApiError:
    if isinstance(exc, (ApiError, Cancelled)):
        return exc  # type: ignore[return-value]
    if isinstance(exc, GuardrailError):
        return ApiError(400, GUARDRAIL_MESSAGE, type="BadRequestError")
    return ApiError(500, f"{what} failed: {type(exc).__name__}: {exc}", type="Internal Server Error")


def run_video(spec: VideoSpec, backend: Any, out_path: Path, ctx: TaskContext, settings: ServerSettings,
              transfer_runner: TransferRunner | None = None) -> VideoResult:
    """Generate (or transfer) and write the MP4 the route returns. Raises ``ApiError`` for the client."""
    started = time.perf_counter()
    try:
        if blocked(spec.prompt, spec.guardrails, settings):
            raise ApiError(400, GUARDRAIL_MESSAGE, type="BadRequestError")
        if spec.kind == "transfer":
            if transfer_runner is None:
                raise ApiError(400, "transfer is not enabled on this server", type="BadRequestError")
            generation = transfer_runner(dict(spec.form), dict(spec.extra_params), spec.rgb_video_path,
                                         dict(spec.control_paths))
        else:
            generation = backend.generate(spec.request, progress=ctx.progress)
        ctx.progress(0, 0)  # a last cancellation check before the file is written
        encode_start = time.perf_counter()
        media.write_mp4(out_path, generation.frames, generation.fps, sound=generation.sound,
                        sample_rate=generation.sample_rate, overwrite=True, **ENCODER)
        stages = _stages(generation.timings)
        stages["encode"] = round(time.perf_counter() - encode_start, 4)
        frames = int(generation.frames.shape[0])
        return VideoResult(path=out_path, fps=float(generation.fps), num_frames=frames,
                           duration_s=frames / float(generation.fps), inference_time_s=time.perf_counter() - started,
                           stage_durations=stages, peak_memory_mb=_peak_memory_mb(),
                           has_sound=generation.sound is not None)
    except BaseException as exc:
        raise _failure(exc, "Video generation") from exc
    finally:
        for path in spec.uploads:
            path.unlink(missing_ok=True)


def run_images(spec: ImageSpec, backend: Any, ctx: TaskContext, settings: ServerSettings) -> ImageResult:
    """Generate ``n`` images one after another (seed, seed+1, ...) and encode them."""
    from PIL import Image

    started = time.perf_counter()
    try:
        if blocked(spec.request.prompt_text(), spec.guardrails, settings):
            raise ApiError(400, GUARDRAIL_MESSAGE, type="BadRequestError")
        images: list[bytes] = []
        stages: dict[str, float] = {}
        size = ""
        fmt = {"jpg": "JPEG", "jpeg": "JPEG", "png": "PNG", "webp": "WEBP"}[spec.output_format]
        for index in range(spec.n):
            request = spec.request if index == 0 else spec.request.replace(seed=spec.request.seed + index)
            generation = backend.generate(request, progress=ctx.progress)
            buffer = io.BytesIO()
            options: dict[str, Any] = {} if fmt == "PNG" else {"quality": spec.output_compression}
            Image.fromarray(generation.frames[0]).save(buffer, format=fmt, **options)
            images.append(buffer.getvalue())
            if index == 0:
                size = f"{generation.width}x{generation.height}"
                stages = _stages(generation.timings)
        media_type = "image/" + ("jpeg" if fmt == "JPEG" else fmt.lower())
        return ImageResult(images=images, size=size, media_type=media_type,
                           inference_time_s=time.perf_counter() - started, stage_durations=stages,
                           peak_memory_mb=_peak_memory_mb())
    except BaseException as exc:
        raise _failure(exc, "Image generation") from exc


def zip_images(images: list[bytes], extension: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for index, data in enumerate(images):
            archive.writestr(f"image_{index}.{extension}", data)
    return buffer.getvalue()
