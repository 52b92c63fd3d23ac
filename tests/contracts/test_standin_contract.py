"""The local stand-in held to the real vLLM-Omni 0.30.0: its answers validate against the real pydantic models'
JSON schemas (``schemas`` in the fixture, generated from the wheel), and the request models it declares are a
subset of the real ones with the same types and limits. A model-free backend keeps this fast."""

from __future__ import annotations

import json
import re
import time

import httpx
import jsonschema
import pytest

from cosmos_helpers.errors import GuardrailError
from cosmos_helpers.result import Generation

# vLLM's ErrorResponse as its exception handlers send it (shared/reference/vllm-omni-protocol.md §2)
ENVELOPE = {"type": "object", "required": ["error"], "additionalProperties": False, "properties": {"error": {
    "type": "object", "required": ["message", "type", "param", "code"], "additionalProperties": False,
    "properties": {"message": {"type": "string"}, "type": {"type": "string"}, "param": {"type": ["string", "null"]},
                   "code": {"type": "integer"}}}}}
FORM = {"prompt": "a robot", "size": "32x32", "num_frames": "5", "num_inference_steps": "1", "seed": "1"}
BLOCK = "forbiddenword"


class Backend:
    """Model-free: a gradient video of the requested shape; a prompt naming ``BLOCK`` is a guardrail block."""

    def generate(self, request, progress=None):
        import numpy as np

        request = request.resolve()
        if BLOCK in request.prompt_text():
            raise GuardrailError("blocked")
        frames = np.zeros((1 if request.is_image else request.num_frames, request.height, request.width, 3), "uint8")
        return Generation(frames=frames, fps=request.fps, seed=request.seed, request=request)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from cosmos_helpers.standins.vllm_omni.local import ThreadedServer

    with ThreadedServer(Backend(), storage_dir=tmp_path_factory.mktemp("contract"), guardrails=True,
                        max_queue=0) as running, httpx.Client(base_url=running.url, timeout=30) as http:
        running.http = http
        yield running


def validate(instance, schema) -> None:
    jsonschema.validate(instance, schema, cls=jsonschema.Draft202012Validator)


def finished(http, job_id: str) -> httpx.Response:
    deadline = time.monotonic() + 30
    while (response := http.get(f"/v1/videos/{job_id}")).json()["status"] in ("queued", "in_progress"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return response


# answers -----------------------------------------------------------------------------------------------------


def test_job_objects_are_real_video_responses(server, vllm_contract):
    schema = vllm_contract["schemas"]["VideoResponse"]
    http = server.http
    queued = http.post("/v1/videos", files=[(k, (None, v)) for k, v in FORM.items()]).json()
    completed = finished(http, queued["id"]).json()
    failed_answer = finished(http, http.post("/v1/videos", files=[(k, (None, v)) for k, v in {
        **FORM, "prompt": f"a {BLOCK}"}.items()]).json()["id"])
    failed = failed_answer.json()
    assert (queued["status"], completed["status"], failed["status"]) == ("queued", "completed", "failed")
    assert failed_answer.status_code == failed["error"]["code"] == 400
    for job in (queued, completed, failed):
        validate(job, schema)
        assert set(job) <= set(schema["properties"]), set(job) - set(schema["properties"])  # nothing invented
    listed = http.get("/v1/videos").json()
    validate(listed, vllm_contract["schemas"]["VideoListResponse"])
    assert set(listed) == set(vllm_contract["schemas"]["VideoListResponse"]["properties"])
    for job in (completed, failed):
        deleted = http.delete(f"/v1/videos/{job['id']}").json()
        validate(deleted, vllm_contract["schemas"]["VideoDeleteResponse"])
        assert set(deleted) == set(vllm_contract["schemas"]["VideoDeleteResponse"]["properties"])


def test_image_answer_is_a_real_image_generation_response(server, vllm_contract):
    schema = vllm_contract["schemas"]["ImageGenerationResponse"]
    for extra in ({}, {"return_stage_metrics": True}, {"n": 2, "output_format": "webp"}):
        answer = server.http.post("/v1/images/generations", json={"prompt": "x", "size": "32x32",
                                                                  "num_inference_steps": 1, **extra}).json()
        validate(answer, schema)
        assert set(answer) <= set(schema["properties"])
        validate(answer["data"][0], schema["$defs"]["ImageData"])


def test_errors_use_the_envelope(server):
    http = server.http
    answers = [
        http.post("/v1/videos/sync", files=[("size", (None, "1x1"))]),  # form validation
        http.post("/v1/videos/sync", files=[(k, (None, v)) for k, v in {**FORM, "num_inference_steps": "500"}.items()]),
        http.post("/v1/videos/sync", files=[(k, (None, v)) for k, v in {**FORM, "prompt": BLOCK}.items()]),
        http.post("/v1/images/generations", json={"prompt": "x", "n": 0}),
        http.post("/v1/images/generations", content=b"{", headers={"content-type": "application/json"}),
        http.get("/v1/videos", params={"limit": -1}),
        http.get(f"/v1/videos/video_gen_{'0' * 32}"),
        http.get("/v1/nowhere"),
        http.patch("/v1/videos"),
    ]
    assert [answer.status_code for answer in answers] == [400, 400, 400, 400, 400, 400, 404, 404, 405]
    for answer in answers:
        validate(answer.json(), ENVELOPE)
        assert answer.json()["error"]["code"] == answer.status_code


# declared request models ---------------------------------------------------------------------------------------


def _option(schema: dict, components: dict) -> dict:
    """The non-null branch of a property, ``$ref`` resolved."""
    options = [o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"]
    assert len(options) == 1, schema
    option = options[0]
    if "$ref" in option:
        name = option["$ref"].rsplit("/", 1)[1]
        option = {**components[name], **{k: v for k, v in option.items() if k != "$ref"}}
    return option


def _kind(option: dict) -> str:
    if option.get("contentMediaType") == "application/octet-stream" or option.get("format") == "binary":
        return "UploadFile"
    if option.get("type") == "string" and option.get("pattern") == r"^\d+x\d+$":
        return "SizeStr"
    if option.get("type") == "string" and option.get("pattern") == r"^[1-9]\d*$":
        return "SecondStr"
    return {"integer": "int", "number": "float", "boolean": "bool", "string": "str", "object": "dict"}[
        option.get("type", "object")]


LIMIT_KEYS = {"minimum": "ge", "maximum": "le", "exclusiveMinimum": "gt", "exclusiveMaximum": "lt"}


def _limits(option: dict) -> dict:
    return {LIMIT_KEYS[key]: value for key, value in option.items() if key in LIMIT_KEYS}


def _route_body(app, path: str, media_type: str) -> str:
    """The name of the model a route declares as its body in the OpenAPI schema FastAPI serves."""
    return app.openapi()["paths"][path]["post"]["requestBody"]["content"][media_type]["schema"]["$ref"].rsplit("/")[-1]


def test_video_form_fields_are_a_subset_of_the_real_form(vllm_contract):
    from cosmos_helpers.standins.vllm_omni.app import create_app
    from cosmos_helpers.standins.vllm_omni.models import VideoForm

    app = create_app(Backend(), warmup=False)
    for path in ("/v1/videos", "/v1/videos/sync"):
        assert _route_body(app, path, "multipart/form-data") == "VideoForm"
    ours = VideoForm.model_json_schema()
    components = ours.get("$defs", {})
    real = {field["name"]: field for field in vllm_contract["video_form_fields"]}
    assert set(ours["properties"]) <= set(real), set(ours["properties"]) - set(real)
    assert set(ours.get("required", [])) == {name for name, field in real.items() if field["required"]}
    for name, prop in ours["properties"].items():
        option = _option(prop, components)
        real_type = re.sub(r"\s*\|\s*None$", "", real[name]["annotation"])
        assert _kind(option) == real_type, (name, option, real[name])
        constraints = {key: value for key, value in real[name].get("constraints", {}).items()
                       if key in LIMIT_KEYS.values()}
        assert _limits(option) == constraints, (name, option, real[name])


def _assert_subset_of_real_model(ours: dict, components: dict, real: dict) -> None:
    real_components = real.get("$defs", {})
    assert set(ours["properties"]) <= set(real["properties"]), set(ours["properties"]) - set(real["properties"])
    assert set(ours.get("required", [])) == set(real.get("required", []))
    for name, prop in ours["properties"].items():
        mine, theirs = _option(prop, components), _option(real["properties"][name], real_components)
        assert (mine.get("type"), _limits(mine)) == (theirs.get("type"), _limits(theirs)), (name, mine, theirs)
        if "enum" in mine and "enum" in theirs:
            assert set(mine["enum"]) <= set(theirs["enum"]), name


def test_image_body_is_a_subset_of_the_real_request(vllm_contract):
    from cosmos_helpers.standins.vllm_omni.app import create_app
    from cosmos_helpers.standins.vllm_omni.models import ImageRequest

    app = create_app(Backend(), warmup=False)
    assert _route_body(app, "/v1/images/generations", "application/json") == "ImageRequest"
    ours = ImageRequest.model_json_schema()
    _assert_subset_of_real_model(ours, ours.get("$defs", {}), vllm_contract["schemas"]["ImageGenerationRequest"])


def test_video_request_model_is_a_subset_of_the_real_request(vllm_contract):
    from cosmos_helpers.standins.vllm_omni.models import VideoRequest

    ours = VideoRequest.model_json_schema()
    real = vllm_contract["schemas"]["VideoGenerationRequest"]
    references = {"image_reference", "video_reference"}  # unions of small models, compared by their shapes below
    plain = {**ours, "properties": {k: v for k, v in ours["properties"].items() if k not in references}}
    _assert_subset_of_real_model({**plain, "required": ours.get("required", [])}, ours.get("$defs", {}), real)
    for name in references:
        shapes = [json.dumps(ours["$defs"][o["$ref"].rsplit("/", 1)[1]]["properties"], sort_keys=True)
                  for o in ours["properties"][name]["anyOf"] if "$ref" in o]
        real_shapes = [json.dumps(real["$defs"][o["$ref"].rsplit("/", 1)[1]]["properties"], sort_keys=True)
                       for o in real["properties"][name]["anyOf"] if "$ref" in o]
        assert shapes and set(shapes) <= set(real_shapes), name
