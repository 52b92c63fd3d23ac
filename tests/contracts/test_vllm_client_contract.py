"""What VllmOmniBackend sends is what the real vLLM-Omni 0.30.0 server reads.

The oracle is the fixture ``vllm_omni-0.30.0.json``, written by ``scripts/refresh_contracts.py`` from the wheel:
the pydantic JSON schemas of ``ImageGenerationRequest`` / ``VideoGenerationRequest``, the video route's form
parameters with their annotations and constraints, where the server reads each field of those models
(``request_reads``), and the ``extra_params`` keys the Cosmos3 pipeline reads.
Each request of the matrix goes through the real client (real httpx, captured by a mock transport), and the
captured body is parsed the way the server would parse it: JSON for images; for video forms, every part is
converted to its form parameter's annotated type as FastAPI does (through pydantic), ``extra_params`` and
``lora`` read as JSON objects, and the result validated against the request model's schema.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import Field, TypeAdapter

from cosmos_helpers import GenerationRequest
from tests.backends.vllm_fake import FakeServer, client_for, request_form

PROMPT = "a small robot crosses a workshop"
CAPTION = {"subjects": [{"name": "robot", "description": "a small wheeled robot"}], "scene": "a workshop"}
# Explicit options and the request fields that set them; each is tried alone on every mode.
OPTIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "negative_prompt": {"negative_prompt": "blurry, distorted"},
    "system_prompt_on": {"use_system_prompt": True},
    "system_prompt_off": {"use_system_prompt": False},
    "resolution_template": {"add_resolution_template": True},
    "duration_template_off": {"add_duration_template": False},
    "guidance_interval": {"guidance_interval": (400, 1000)},
    "guardrails_on": {"guardrails": True},
    "structured_caption": {"prompt": CAPTION, "negative_prompt": {"avoid": ["blur"]}},
}
MODES: dict[str, dict[str, Any]] = {
    "t2i": {"mode": "text2image"},
    "t2v": {"mode": "text2video"},
    "t2v_sound": {"mode": "text2video", "sound": True},
    "i2v": {"mode": "image2video", "image": "IMAGE"},
    "i2v_sound": {"mode": "image2video", "image": "IMAGE", "sound": True},
    "v2v_file": {"mode": "video2video", "video": "VIDEO", "condition_frames": (0, 1, 2)},
    "v2v_array": {"mode": "video2video", "video": "ARRAY", "condition_video_keep": "last"},
}
FORM_TYPES = {"str": str, "int": int, "float": float, "bool": bool, "SizeStr": str, "SecondStr": str}
JSON_OBJECT_FIELDS = ("extra_params", "lora")  # helpers.py: parsed with json.loads, must be objects


def _build(mode: str, option: str, assets, rgb_video) -> GenerationRequest:
    values: dict[str, Any] = {"prompt": PROMPT, "num_inference_steps": 2, "seed": 7, **MODES[mode], **OPTIONS[option]}
    media = {"IMAGE": assets / "images/rolling_ball.png", "VIDEO": assets / "videos/rolling_ball.mp4",
             "ARRAY": rgb_video}
    for name in ("image", "video"):
        if name in values:
            values[name] = media[values[name]]
    return GenerationRequest(**values)


def _sent(request: GenerationRequest):
    server = FakeServer()
    client_for(server).generate(request)
    (post,) = [r for r in server.requests if r.method == "POST"]
    return post


def _read_fields(contract: dict, model: str) -> set[str]:
    """Fields of ``model`` the server reads somewhere (a field it never reads would be silently ignored)."""
    return set(contract["request_reads"][model]) & set(contract["schemas"][model]["properties"])


def _check_read(sent: set[str], contract: dict, model: str) -> None:
    ignored = sent - _read_fields(contract, model)
    assert not ignored, f"{model} fields the server never reads: {ignored}"


def _pipeline_keys(contract: dict) -> set[str]:
    cosmos3 = contract["cosmos3"]
    return set(cosmos3["pipeline_reads"]) | set(cosmos3["extra_body_params"])


def _boolean_keys(contract: dict) -> set[str]:
    """Keys the pipeline reads as booleans (their defaults are booleans), plus ``guardrails`` (bool() on it)."""
    reads = contract["cosmos3"]["pipeline_reads"]
    flags = {key for key, sites in reads.items() if all(s["default"] in ("False", "True", "is_v2v") for s in sites)}
    return flags | {"guardrails"}


def _check_extra_params(extra: Any, contract: dict) -> None:
    assert isinstance(extra, dict)
    unknown = set(extra) - _pipeline_keys(contract)
    assert not unknown, f"extra_params keys the Cosmos3 pipeline does not read: {unknown}"
    for key in _boolean_keys(contract) & set(extra):
        assert type(extra[key]) is bool, f"{key}={extra[key]!r}: a string would be truthy"


def _form_value(parameter: dict, value: str) -> Any:
    """A form part as FastAPI hands it to the route: the annotated type, with its constraints, via pydantic."""
    if parameter["name"] in JSON_OBJECT_FIELDS:
        parsed = json.loads(value)
        assert isinstance(parsed, dict), parameter["name"]
        return parsed
    base = parameter["annotation"].split("|")[0].strip()
    kind = FORM_TYPES[base]
    constraints = parameter.get("constraints") or {}
    return TypeAdapter(Annotated[kind, Field(**constraints)] if constraints else kind).validate_python(value)


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("mode", list(MODES))
def test_requests_are_valid_for_the_real_server(vllm_contract, assets, rgb_video, mode, option):
    request = _build(mode, option, assets, rgb_video)
    post = _sent(request)
    if request.mode == "text2image":
        schema = vllm_contract["schemas"]["ImageGenerationRequest"]
        body = json.loads(post.read())
        assert set(body) <= set(schema["properties"]), set(body) - set(schema["properties"])
        Draft202012Validator(schema).validate(body)
        assert "use_system_prompt" not in body  # a string enum on this route; the option is in extra_params
        _check_extra_params(body["extra_params"], vllm_contract)
        return
    parameters = {p["name"]: p for p in vllm_contract["video_form_fields"]}
    fields, files = request_form(post)
    assert set(files) <= {name for name, p in parameters.items() if p["kind"] == "File"}
    assert all(parameters.get(name, {}).get("kind") == "Form" for name in fields), set(fields) - set(parameters)
    assert "num_frames" in fields  # omitted, the server makes a one-frame video
    typed = {name: _form_value(parameters[name], value) for name, value in fields.items()}
    schema = vllm_contract["schemas"]["VideoGenerationRequest"]
    Draft202012Validator(schema).validate(typed)
    _check_extra_params(typed["extra_params"], vllm_contract)


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("mode", list(MODES))
def test_every_field_sent_is_read_by_the_server(vllm_contract, assets, rgb_video, mode, option):
    """Each JSON key / form field is read by the server's route code; each extra_params key by the pipeline."""
    post = _sent(_build(mode, option, assets, rgb_video))
    if post.url.path.endswith("/generations"):
        body = json.loads(post.read())
        _check_read(set(body), vllm_contract, "ImageGenerationRequest")
    else:
        fields, files = request_form(post)
        _check_read(set(fields), vllm_contract, "VideoGenerationRequest")
        # a file part is read by the form parser itself (helpers.py), so it only has to be one of its File fields
        assert set(files) <= {p["name"] for p in vllm_contract["video_form_fields"] if p["kind"] == "File"}
        body = {"extra_params": json.loads(fields["extra_params"])}
    _check_extra_params(body["extra_params"], vllm_contract)


def test_sound_is_asked_for_without_a_duration(vllm_contract, assets, rgb_video):
    """The pipeline derives the sound's length from num_frames / fps when ``sound_duration`` is absent, so the
    client sends none (a rounded copy of that length could only change it)."""
    fields, _ = request_form(_sent(_build("t2v_sound", "defaults", assets, rgb_video)))
    reads = vllm_contract["cosmos3"]["pipeline_reads"]
    assert [site["default"] for site in reads["sound_duration"]] == ["None"]  # absent -> derived
    assert fields["generate_sound"] == "true" and "sound_duration" not in fields


@pytest.mark.parametrize("option,key", [("system_prompt_on", "use_system_prompt"),
                                        ("resolution_template", "use_resolution_template"),
                                        ("duration_template_off", "use_duration_template"),
                                        ("guidance_interval", "guidance_interval")])
def test_each_option_reaches_a_key_the_pipeline_reads(vllm_contract, assets, rgb_video, option, key):
    """Set, the option is sent under the pipeline's own key; unset, nothing overrides the pipeline's default."""
    reads = vllm_contract["cosmos3"]["pipeline_reads"]
    assert key in reads
    for mode in ("t2i", "t2v"):
        with_option, without = (_extra(_sent(_build(mode, o, assets, rgb_video))) for o in (option, "defaults"))
        assert key in with_option and key not in without


def _extra(post) -> dict:
    if post.url.path.endswith("/generations"):
        return json.loads(post.read())["extra_params"]
    return json.loads(request_form(post)[0]["extra_params"])


def test_the_schema_check_would_catch_a_wrong_type(vllm_contract):
    """The validation above is not vacuous: a string boolean or an unknown key fails it."""
    parameters = {p["name"]: p for p in vllm_contract["video_form_fields"]}
    with pytest.raises(Exception):
        _form_value(parameters["num_frames"], "nine")
    with pytest.raises(Exception):
        _form_value(parameters["fps"], "0.5")  # fps >= 1
    with pytest.raises(AssertionError):
        _check_extra_params({"guardrails": "false"}, vllm_contract)
    with pytest.raises(AssertionError):
        _check_extra_params({"extra_args": {}}, vllm_contract)
    with pytest.raises(AssertionError, match="never reads"):  # a form field FastAPI accepts but nothing reads
        _check_read({"prompt", "user"}, vllm_contract, "VideoGenerationRequest")
    with pytest.raises(AssertionError, match="never reads"):
        _check_read({"prompt", "vae_use_tiling"}, vllm_contract, "ImageGenerationRequest")
    image = vllm_contract["schemas"]["ImageGenerationRequest"]
    assert not Draft202012Validator(image).is_valid({"prompt": "x", "response_format": "png"})  # $defs ref
    assert not Draft202012Validator(image).is_valid({"prompt": "x", "use_system_prompt": True})
