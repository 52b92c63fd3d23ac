"""The stand-in's wire format: pydantic models shaped like vLLM-Omni 0.30.0's own (held to the real schemas by
``tests/contracts/test_standin_contract.py``), so FastAPI gives the same validation and wording, and vLLM's error
envelope ``{"error": {"message", "type", "param", "code"}}`` for every error (never ``{"detail": ...}``, never 422).

A video POST is read in two layers, as upstream: ``VideoForm`` (the multipart form, as text: FastAPI's 400 "N
validation errors", ``param`` ``body.<field>``), then ``VideoRequest`` (its JSON fields parsed: 400
"BadRequestError" with pydantic's text).
"""

from __future__ import annotations

import json
import time
from functools import partial
from typing import Annotated, Any, Literal, Mapping

from fastapi import UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model, field_validator
from pydantic import ValidationError as PydanticValidationError
from starlette.exceptions import HTTPException

from ...errors import ValidationError
from ...protocol import vllm_omni as vo

VALUE_ERROR = "BadRequestError"


class ApiError(HTTPException):
    """An HTTP error with vLLM's ``type`` and ``param``; FastAPI passes it through body parsing untouched."""

    def __init__(self, status: int, message: str, *, type: str | None = None, param: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status, detail=message, headers=headers)
        self.message, self.type, self.param = message, type, param


bad_request = partial(ApiError, 400)  # vLLM-Omni's own HTTPException(400, ...): the HTTP phrase as type
value_error = partial(ApiError, 400, type=VALUE_ERROR)  # a ValueError raised while vLLM-Omni builds the request


def envelope(status: int, message: str, *, type: str | None = None, param: str | None = None,
             headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(vo.error_body(status, message, type=type, param=param), status_code=status, headers=headers)


def install_error_handlers(app) -> None:
    async def http_error(_request, exc: HTTPException) -> JSONResponse:
        return envelope(exc.status_code, str(exc.detail), type=getattr(exc, "type", None),
                        param=getattr(exc, "param", None), headers=exc.headers)

    async def invalid_body(_request, exc: RequestValidationError) -> JSONResponse:
        message, param = vo.validation_message(list(exc.errors()))
        return envelope(400, message, param=param)

    async def invalid_value(_request, exc: Exception) -> JSONResponse:  # VideoForm.to_request, GenerationRequest
        return envelope(400, str(exc), type=VALUE_ERROR, param=getattr(exc, "field", None))

    async def unexpected(_request, exc: Exception) -> JSONResponse:
        return envelope(500, f"{type(exc).__name__}: {exc}")
    for kind, handler in ((HTTPException, http_error), (RequestValidationError, invalid_body),
                          (PydanticValidationError, invalid_value), (ValidationError, invalid_value),
                          (Exception, unexpected)):
        app.add_exception_handler(kind, handler)


SizeStr = Annotated[str, StringConstraints(pattern=vo.SIZE_PATTERN.pattern)]
SecondStr = Annotated[str, StringConstraints(pattern=vo.SECONDS_PATTERN.pattern)]
_STEPS, _GUIDANCE, _N, _COMPRESSION = (vo.LIMITS[k] for k in ("num_inference_steps", "guidance_scale", "n",
                                                              "output_compression"))
_Int64 = Annotated[int, Field(ge=vo.INT64_MIN, le=vo.INT64_MAX)]
_Positive64 = Annotated[int, Field(ge=1, le=vo.INT64_MAX)]


class ImageRequest(BaseModel):
    """``POST /v1/images/generations`` (protocol/images.py): the fields the stand-in reads; others are ignored."""

    prompt: str
    model: str | None = None
    n: int = Field(1, ge=_N[0], le=_N[1])
    size: str | None = None
    response_format: Literal["b64_json", "url", "file"] = "b64_json"  # "url": declared upstream, refused below
    negative_prompt: str | None = None
    system_prompt: str | None = None
    use_system_prompt: Literal[vo.USE_SYSTEM_PROMPT_TYPES] | None = None  # type: ignore[valid-type]
    num_inference_steps: int | None = Field(None, ge=_STEPS[0], le=_STEPS[1])
    guidance_scale: float | None = Field(None, ge=_GUIDANCE[0], le=_GUIDANCE[1])
    true_cfg_scale: float | None = Field(None, ge=_GUIDANCE[0], le=_GUIDANCE[1])
    flow_shift: float | None = None
    extra_params: dict[str, Any] | None = None
    seed: _Int64 | None = None
    lora: dict[str, Any] | None = None
    output_format: str | None = None
    output_compression: int = Field(100, ge=_COMPRESSION[0], le=_COMPRESSION[1])
    return_stage_metrics: bool | None = None

    @field_validator("size")
    @classmethod
    def _size_has_x(cls, value: str | None) -> str | None:
        if value is not None and "x" not in value:
            raise ValueError("size must be in format 'WIDTHxHEIGHT' (e.g., '1024x1024')")
        return value

    @field_validator("response_format")
    @classmethod
    def _no_urls(cls, value: str) -> str:
        if value not in vo.IMAGE_RESPONSE_FORMATS:
            raise ValueError(f"Only 'b64_json' or 'file' response format is supported, got: {value}")
        return value


class ImageData(BaseModel):
    b64_json: str | None = None
    url: str | None = None
    revised_prompt: str | None = None


class ImageResponse(BaseModel):
    created: int
    data: list[ImageData]
    output_format: str | None = None
    size: str
    cot_output: str | None = None
    metrics: dict[str, Any] | None = None


class VideoForm(BaseModel):
    """The multipart form of ``POST /v1/videos`` and ``/sync`` (video/generation/helpers.py:852-890), as text."""

    prompt: str
    model: str | None = None
    size: SizeStr | None = None
    width: int | None = None
    height: int | None = None
    num_frames: int | None = None
    seconds: SecondStr | None = None
    fps: float | None = Field(None, ge=1, allow_inf_nan=False)
    negative_prompt: str | None = None
    num_inference_steps: int | None = None
    guidance_scale: float | None = None
    flow_shift: float | None = None
    seed: int | None = None
    generate_sound: bool | None = None
    sound_duration: float | None = Field(None, gt=0.0)
    quality: str | None = None
    extra_params: str | None = Field(None, description="a JSON object, as text")
    lora: str | None = Field(None, description="a JSON object, as text")
    return_stage_metrics: bool | None = None
    image_reference: str | None = Field(None, description='{"image_url": "data:... | http(s)://..."}, as text')
    video_reference: str | None = Field(None, description='{"video_url": "data:... | http(s)://..."}, as text')
    control_type: str | None = None
    input_reference: UploadFile | None = Field(None, description="an image or a video, sniffed by content")
    control_reference: UploadFile | None = Field(None, description="a transfer control video")

    def to_request(self) -> "VideoRequest":
        """The typed request (JSON fields parsed); raises pydantic's ValidationError for the model's limits."""
        values = self.model_dump(exclude_none=True, exclude={"input_reference", "control_reference", "control_type"})
        for name in ("extra_params", "lora", "image_reference", "video_reference"):
            if name in values:
                values[name] = form_json(values[name], name, expect_object=name in ("extra_params", "lora"))
        return VideoRequest.model_validate(values)


def form_json(text: str, name: str, *, expect_object: bool) -> Any:
    """A JSON form field (vLLM-Omni's ``_parse_form_json``); a nesting bomb is bad JSON, not a crash."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise bad_request(f"Invalid JSON in form field '{name}': {detail}", param=name) from None
    if expect_object and not isinstance(value, dict):
        raise bad_request(f"Invalid JSON in form field '{name}': expected dict, got {type(value).__name__}.",
                          param=name)
    return value


_UrlImage = create_model("_UrlImage", __config__=ConfigDict(extra="forbid"), image_url=(str, ...))
_UrlVideo = create_model("_UrlVideo", __config__=ConfigDict(extra="forbid"), video_url=(str, ...))
_FileReference = create_model("_FileReference", __config__=ConfigDict(extra="forbid"), file_id=(str, ...))


class VideoRequest(BaseModel):
    """What a video form means, with the limits of ``VideoGenerationRequest`` (protocol/videos.py)."""

    prompt: str
    model: str | None = None
    size: SizeStr | None = None
    seconds: SecondStr | None = None
    width: _Positive64 | None = None
    height: _Positive64 | None = None
    num_frames: _Positive64 | None = None
    fps: float | None = Field(None, ge=1, le=vo.INT64_MAX, allow_inf_nan=False)
    negative_prompt: str | None = None
    num_inference_steps: int | None = Field(None, ge=_STEPS[0], le=_STEPS[1])
    guidance_scale: float | None = Field(None, ge=_GUIDANCE[0], le=_GUIDANCE[1])
    flow_shift: float | None = None
    seed: _Int64 | None = None
    generate_sound: bool = False
    sound_duration: float | None = Field(None, gt=0.0)
    quality: str | None = None
    extra_params: dict[str, Any] | None = None
    lora: dict[str, Any] | None = None
    return_stage_metrics: bool | None = None
    image_reference: _UrlImage | _FileReference | None = None
    video_reference: _UrlVideo | _FileReference | None = None

    @field_validator("quality")
    @classmethod
    def _known_quality(cls, value: str | None) -> str | None:
        if value is not None and value not in vo.QUALITY_LEVELS:
            raise ValueError(f"quality must be one of {list(vo.QUALITY_LEVELS)}, got {value!r}")
        return value


class VideoError(BaseModel):
    code: int | str
    message: str


class VideoJob(BaseModel):
    """A job as ``/v1/videos`` shows it (protocol/videos.py VideoResponse; ``action`` for action requests)."""

    id: str
    object: Literal["video"] = "video"
    model: str
    prompt: str
    status: Literal[vo.JOB_STATUSES] = "queued"  # type: ignore[valid-type]
    progress: int = 0
    size: SizeStr | None = None
    seconds: SecondStr = "4"
    quality: str = "default"
    created_at: int = Field(default_factory=lambda: int(time.time()))
    completed_at: int | None = None
    expires_at: int | None = None
    remixed_from_video_id: str | None = None
    error: VideoError | None = None
    media_type: Literal["video/mp4"] = "video/mp4"
    file_name: str | None = None
    inference_time_s: float | None = None
    fps: float | None = None
    num_frames: int | None = None
    duration_s: float | None = None
    metrics: dict[str, Any] | None = None
    stage_durations: dict[str, float] = Field(default_factory=dict)
    peak_memory_mb: float = 0.0
    action: dict[str, Any] | None = None


class VideoList(BaseModel):
    object: Literal["list"] = "list"
    data: list[VideoJob]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class VideoDeleted(BaseModel):
    id: str
    deleted: bool = True
    object: Literal["video.deleted"] = "video.deleted"


# Valid requests for the OpenAPI page (and the schema-driven fuzzer, which sends them as they are).
IMAGE_EXAMPLES = {
    "png": {"summary": "a small PNG", "value": {"prompt": "a robot workshop", "size": "32x32",
                                                 "num_inference_steps": 1, "seed": 3}},
    "jpeg_files": {"summary": "two JPEG files (a zip)", "value": {
        "prompt": "a robot", "size": "16x32", "n": 2, "num_inference_steps": 1, "response_format": "file",
        "output_format": "jpeg"}},
}
VIDEO_EXAMPLES = {
    "text2video": {"summary": "a small text2video", "value": {
        "prompt": "a small robot crosses a workshop", "size": "32x32", "num_frames": 5, "fps": 8,
        "num_inference_steps": 1, "seed": 1, "extra_params": '{"guardrails": false}'}},
    "one_frame": {"summary": "num_frames and seconds omitted: a 1-frame video", "value": {
        "prompt": "a kettle on a stove", "size": "16x16", "num_inference_steps": 1}},
}


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: int


class ErrorEnvelope(BaseModel):
    """Every error answer (vLLM's production envelope)."""

    error: ErrorDetail
