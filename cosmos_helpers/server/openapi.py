"""OpenAPI descriptions of the bodies the route handlers parse by hand (multipart video forms, the image JSON).

FastAPI cannot infer them (the handlers read ``request.form()`` / ``request.body()`` so that every error keeps
vLLM's envelope and status codes), so they are declared here through ``openapi_extra``. Constraints follow
``shared/reference/vllm-omni-protocol.md`` §3-§4; the ``examples`` are valid requests, which schema-driven
fuzzers (schemathesis' explicit phase) send as they are.
"""

from __future__ import annotations

from typing import Any

DESCRIPTION = (
    "A local stand-in for vLLM-Omni 0.30.0 serving Cosmos3 (cosmos-helpers). Errors use vLLM's envelope "
    '`{"error": {"message", "type", "param", "code"}}`: 400 bad input, 401 missing key, 404 unknown job, 413 body or '
    "field too large, 429 queue full (with Retry-After), 500 generation failure, 504 sync timeout."
)

ERROR_ENVELOPE = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": "integer"},
            },
        },
    },
}

_ERROR = {"content": {"application/json": {"schema": ERROR_ENVELOPE}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Bad request (validation, guardrail block)", **_ERROR},
    401: {"description": "Missing or wrong API key", **_ERROR},
    404: {"description": "Unknown (or malformed) job id", **_ERROR},
    413: {"description": "Request body or a form field too large", **_ERROR},
    429: {"description": "Queue full; retry after the Retry-After header's seconds", **_ERROR},
    500: {"description": "Generation failed", **_ERROR},
    504: {"description": "Synchronous generation timed out (queueing included)", **_ERROR},
}

HINTS = ["edge", "blur", "depth", "seg", "wsm"]

VIDEO_FORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["prompt"],
    "properties": {
        "prompt": {"type": "string", "description": "text or a compact JSON caption"},
        "negative_prompt": {"type": "string"},
        "model": {"type": "string", "description": "must equal the served model name if sent"},
        "size": {"type": "string", "pattern": r"^\d+x\d+$", "description": "WxH, multiples of 16"},
        "width": {"type": "integer", "minimum": 1},
        "height": {"type": "integer", "minimum": 1},
        "num_frames": {"type": "integer", "minimum": 1, "description": "rounded up to 4k+1; omitted -> 1"},
        "seconds": {"type": "string", "pattern": r"^[1-9]\d*$"},
        "fps": {"type": "number", "minimum": 1},
        "num_inference_steps": {"type": "integer", "minimum": 1, "maximum": 200},
        "guidance_scale": {"type": "number", "minimum": 0, "maximum": 20},
        "flow_shift": {"type": "number"},
        "seed": {"type": "integer"},
        "generate_sound": {"type": "boolean"},
        "sound_duration": {"type": "number", "exclusiveMinimum": 0},
        "quality": {"type": "string", "enum": ["default", "lossless", "high"]},
        "extra_params": {"type": "string", "description": "a JSON object, as a string (protocol §7)"},
        "lora": {"type": "string", "description": "a JSON object, as a string (unused)"},
        "image_reference": {"type": "string", "description": '{"image_url": "data:... | http(s)://..."}'},
        "video_reference": {"type": "string", "description": '{"video_url": "data:... | http(s)://..."}'},
        "input_reference": {"type": "string", "format": "binary", "description": "an image or a video"},
        "control_reference": {"type": "string", "format": "binary", "description": "a transfer control video"},
        "control_type": {"type": "string", "enum": HINTS},
    },
}

_VIDEO_EXAMPLES = {
    "tiny_text2video": {"summary": "a tiny text2video",
                        "value": {"prompt": "a small robot crosses a workshop", "size": "32x32", "num_frames": 5,
                                  "fps": 8, "num_inference_steps": 1, "seed": 1,
                                  "extra_params": '{"guardrails": false}'}},
    "tiny_single_frame": {"summary": "num_frames omitted: a 1-frame video",
                          "value": {"prompt": "a kettle on a stove", "size": "16x16", "num_inference_steps": 1}},
}

IMAGES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["prompt"],
    "properties": {
        "prompt": {"type": "string"},
        "model": {"type": ["string", "null"]},
        "n": {"type": "integer", "minimum": 1, "maximum": 10},
        "size": {"type": ["string", "null"], "pattern": r"^\d+x\d+$"},
        "response_format": {"type": "string", "enum": ["b64_json", "file"]},
        "negative_prompt": {"type": ["string", "null"]},
        "num_inference_steps": {"type": "integer", "minimum": 1, "maximum": 200},
        "guidance_scale": {"type": "number", "minimum": 0, "maximum": 20},
        "true_cfg_scale": {"type": ["number", "null"], "minimum": 0, "maximum": 20},
        "flow_shift": {"type": "number"},
        "seed": {"type": "integer"},
        "extra_params": {"type": ["object", "null"]},
        "output_format": {"type": "string", "enum": ["png", "jpeg", "jpg", "webp"]},
        "output_compression": {"type": "integer", "minimum": 0, "maximum": 100},
        "use_system_prompt": {"type": ["string", "null"]},
    },
}

_IMAGE_EXAMPLES = {
    "tiny_png": {"summary": "a tiny PNG", "value": {"prompt": "a robot workshop", "size": "32x32",
                                                     "num_inference_steps": 1, "seed": 3}},
    "tiny_jpeg_file": {"summary": "raw JPEG bytes", "value": {"prompt": "a robot", "size": "16x32", "n": 2,
                                                              "num_inference_steps": 1,
                                                              "response_format": "file", "output_format": "jpeg"}},
}

LIST_PARAMETERS: dict[str, Any] = {"parameters": [
    {"name": "limit", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 0, "maximum": 100}},
    {"name": "order", "in": "query", "required": False, "schema": {"type": "string", "enum": ["asc", "desc"]}},
    {"name": "after", "in": "query", "required": False, "schema": {"type": "string"}},
]}


def video_body() -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"multipart/form-data": {
        "schema": VIDEO_FORM_SCHEMA, "examples": _VIDEO_EXAMPLES}}}}


def images_body() -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": IMAGES_SCHEMA, "examples": _IMAGE_EXAMPLES}}}}
