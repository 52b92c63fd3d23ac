"""The stand-in against the vLLM-Omni 0.30.0 protocol, spoken to with raw HTTP (httpx) on loopback, with the real
tiny Diffusers model behind it: routes, validation and its envelope, answers, media, guardrail, job lifecycle."""

from __future__ import annotations

import base64
import io
import json
import re
import zipfile

import pytest

from .conftest import BLOCK_WORD, EXTRA, assert_envelope, decode_mp4, form, mp4_bytes, multipart, png_bytes, wait_status

# health, models, envelope ------------------------------------------------------------------------------


def test_health_and_models(http):
    assert http.get("/health").json() == {"status": "healthy"}
    models = http.get("/v1/models").json()
    assert models["object"] == "list"
    entry = models["data"][0]
    assert entry["id"] == "tiny" and entry["object"] == "model" and entry["owned_by"] == "vllm"
    assert entry["root"] == "tiny" and entry["parent"] is None and isinstance(entry["permission"], list)
    assert entry["cosmos_helpers_standin"]["model_run"] == "tiny"  # a key real vLLM-Omni cards do not have


def test_unknown_routes_and_methods_use_the_envelope(http):
    assert_envelope(http.get("/v1/nothing-here"), 404, "Not Found")
    assert_envelope(http.put("/v1/videos", content=b"x"), 405, "Method Not Allowed")


# validation: every error is a 400 in vLLM's envelope, never a 422 -------------------------------------------

BAD, VALUE = "Bad Request", "BadRequestError"
VIDEO_ERRORS = [
    # the form (FastAPI's validation of vLLM's form declaration)
    ({"prompt": None}, "Field required", BAD, "body.prompt"),
    ({"size": "160*96"}, "String should match pattern", BAD, "body.size"),
    ({"seconds": "0", "num_frames": None}, "String should match pattern", BAD, "body.seconds"),
    ({"fps": "0.5"}, "greater than or equal to 1", BAD, "body.fps"),
    ({"fps": "nan"}, "finite number", BAD, "body.fps"),
    ({"num_frames": "nine"}, "valid integer", BAD, "body.num_frames"),
    ({"generate_sound": "maybe"}, "valid boolean", BAD, "body.generate_sound"),
    ({"sound_duration": "0"}, "greater than 0", BAD, "body.sound_duration"),
    # the request model (VideoGenerationRequest's limits, raised while the form is read)
    ({"num_frames": "0"}, "num_frames", VALUE, None),
    ({"num_inference_steps": "201"}, "num_inference_steps", VALUE, None),
    ({"guidance_scale": "21"}, "guidance_scale", VALUE, None),
    ({"quality": "ultra"}, "quality must be one of ['lossless', 'high']", VALUE, None),
    ({"image_reference": json.dumps({"image_url": "data:,", "extra": 1})}, "image_reference", VALUE, None),
    # vLLM-Omni's own HTTPExceptions
    ({"extra_params": "{not json"}, "Invalid JSON in form field 'extra_params'", BAD, "extra_params"),
    ({"extra_params": "[1, 2]"}, "Invalid JSON in form field 'extra_params': expected dict", BAD, "extra_params"),
    ({"lora": "nope"}, "Invalid JSON in form field 'lora'", BAD, "lora"),
    ({"model": "someone/else"}, "Model mismatch: request specifies 'someone/else' but server is running 'tiny'.",
     BAD, "model"),
    ({"control_type": "edge"}, "control_type requires a control_reference upload.", BAD, "control_type"),
    ({"image_reference": json.dumps({"file_id": "abc"})}, "file_id references are not supported", BAD,
     "image_reference"),
    # pipeline errors (vLLM-Omni: 500 from inside the pipeline), answered up front
    ({"extra_params": json.dumps({"control_guidance": 1.5})}, "no transfer hint was selected", VALUE,
     "extra_params.control_guidance"),
    ({"extra_params": json.dumps({"condition_video_keep": "middle"})}, "condition_video_keep", VALUE, None),
    ({"extra_params": json.dumps({"edge": {"control_weight": -1}})}, "control_weight", VALUE,
     "extra_params.edge.control_weight"),
    ({"extra_params": json.dumps({"edge": {"weight": 1}})}, "unsupported field(s) weight", VALUE, "extra_params.edge"),
    ({"extra_params": json.dumps({"edge": {"preset_edge_threshold": "extreme"}})}, "preset_edge_threshold must be "
     "one of none, very_low", VALUE, None),
    ({"extra_params": json.dumps({"negative_metadata_mode": "opposite"})}, "negative_metadata_mode", VALUE, None),
    ({"extra_params": json.dumps({"action_mode": "policy"})}, "needs an embodiment name", VALUE,
     "extra_params.domain_name"),
    ({"extra_params": json.dumps({"robot_obs": {}})}, "RoboLab", VALUE, "extra_params.robot_obs"),
    # what the tiny model and GenerationRequest cannot follow (names the field and the fix)
    ({"size": "100x96"}, "width: 100 is not a multiple of 16", VALUE, "width"),
    ({"seed": "-3"}, "seed", VALUE, "seed"),
    ({"extra_params": json.dumps({"guidance_interval": [900, 100]})}, "guidance_interval", VALUE,
     "guidance_interval"),
]


@pytest.mark.parametrize("route", ["/v1/videos/sync", "/v1/videos"])
@pytest.mark.parametrize("overrides,message,type_,param", VIDEO_ERRORS)
def test_video_validation_errors(http, route, overrides, message, type_, param):
    assert_envelope(http.post(route, files=multipart(form(**overrides))), 400, message, type_=type_, param=param)


def test_media_validation_errors(http, rgb_image, rgb_video, tmp_path):
    image = ("ref.png", png_bytes(rgb_image), "image/png")
    video = ("ref.mp4", mp4_bytes(tmp_path, rgb_video), "video/mp4")
    data_image = json.dumps({"image_url": "data:image/png;base64," + base64.b64encode(image[1]).decode()})
    cases = [
        (form(), {"input_reference": ("x.png", b"definitely not media", "image/png")}, "Invalid input_reference"),
        (form(), {"input_reference": ("empty.png", b"", "image/png")}, "Invalid input_reference: the file is empty"),
        (form(image_reference=data_image), {"input_reference": image}, "Provide only one of input_reference"),
        (form(image_reference=data_image, video_reference=json.dumps({"video_url": "data:video/mp4;base64,AA"})),
         {}, "either image or video input, not both"),
        (form(), {"control_reference": video}, "control_reference requires control_type."),
        (form(control_type="normal"), {"control_reference": video},
         "Control upload type 'normal' is not supported by this model"),
        (form(control_type="edge", extra_params=json.dumps({"edge": {"control_path": "/x.mp4"}})),
         {"control_reference": video}, "Provide either control_reference or extra_params.edge.control/control_path"),
        (form(extra_params=json.dumps({"edge": True})), {"input_reference": video},
         "transfer is not enabled on this server"),
        (form(num_frames=None), {"input_reference": image}, "num_frames: image2video needs at least 5 frames"),
    ]
    for fields, files, message in cases:
        assert_envelope(http.post("/v1/videos/sync", files=multipart(fields, files)), 400, message)


IMAGE_ERRORS = [
    ({"prompt": None}, "Field required", BAD, "body.prompt"),
    ({"prompt": 5}, "valid string", BAD, "body.prompt"),
    ({"n": 11}, "less than or equal to 10", BAD, "body.n"),
    ({"response_format": "url"}, "Only 'b64_json' or 'file' response format is supported", BAD,
     "body.response_format"),
    ({"size": "big"}, "size must be in format 'WIDTHxHEIGHT'", BAD, "body.size"),
    ({"size": "32x"}, "Width and height must be integers", VALUE, "size"),
    ({"num_inference_steps": 0}, "greater than or equal to 1", BAD, "body.num_inference_steps"),
    ({"guidance_scale": 25}, "less than or equal to 20", BAD, "body.guidance_scale"),
    ({"output_compression": 101}, "less than or equal to 100", BAD, "body.output_compression"),
    ({"seed": 2**64}, "less than or equal to 9223372036854775807", BAD, "body.seed"),
    ({"use_system_prompt": "yes"}, "Input should be 'dynamic'", BAD, "body.use_system_prompt"),
    ({"extra_params": "guardrails=false"}, "valid dictionary", BAD, "body.extra_params"),
    ({"model": "someone/else"}, "Model mismatch", BAD, "model"),
]


@pytest.mark.parametrize("overrides,message,type_,param", IMAGE_ERRORS)
def test_image_validation_errors(http, overrides, message, type_, param):
    body = {"prompt": "a workshop", "size": "160x96", "num_inference_steps": 2, "seed": 0}
    for key, value in overrides.items():
        if value is None:
            body.pop(key)
        else:
            body[key] = value
    assert_envelope(http.post("/v1/images/generations", json=body), 400, message, type_=type_, param=param)


def test_image_route_needs_json(http):
    assert_envelope(http.post("/v1/images/generations", content=b"prompt=x", headers={"content-type": "text/plain"}),
                    400, "application/json")
    assert_envelope(http.post("/v1/images/generations", content=b"{broken",
                              headers={"content-type": "application/json"}), 400, "JSON decode error")


def test_list_and_job_route_errors(http):
    assert_envelope(http.get("/v1/videos", params={"limit": 101}), 400, "less than or equal to 100",
                    param="query.limit")
    assert_envelope(http.get("/v1/videos", params={"order": "sideways"}), 400, "'asc' or 'desc'",
                    param="query.order")
    for method, path in [("GET", ""), ("GET", "/content"), ("DELETE", "")]:
        assert_envelope(http.request(method, f"/v1/videos/video_gen_{'0' * 32}{path}"), 404, "Video not found")


# images --------------------------------------------------------------------------------------------------


def test_image_json_answer(http):
    body = {"prompt": "a workshop", "size": "160x96", "num_inference_steps": 2, "seed": 3,
            "extra_params": {"guardrails": True}, "extra_args": {"ignored": True}, "unknown_key": 1}
    answer = http.post("/v1/images/generations", json=body).json()
    assert set(answer) == {"created", "data", "output_format", "size", "cot_output", "metrics"}
    assert answer["size"] == "160x96" and answer["output_format"] == "png" and answer["cot_output"] is None
    item = answer["data"][0]
    assert item["url"] is None and item["revised_prompt"] is None
    assert base64.b64decode(item["b64_json"])[:8] == b"\x89PNG\r\n\x1a\n"
    # vLLM always reports these two (null when empty: no CUDA memory here); the rest only when asked
    assert answer["metrics"]["peak_memory_mb"] is None and set(answer["metrics"]) == {"stage_durations",
                                                                                       "peak_memory_mb"}
    assert {"denoise", "vae_decode"} <= set(answer["metrics"]["stage_durations"])
    asked = http.post("/v1/images/generations", json={**body, "return_stage_metrics": True}).json()
    assert set(asked["metrics"]) > {"stage_durations", "peak_memory_mb"}


def test_image_file_answers(http):
    body = {"prompt": "a workshop", "size": "160x96", "num_inference_steps": 1, "seed": 3, "response_format": "file"}
    single = http.post("/v1/images/generations", json=body)
    assert single.headers["content-type"] == "image/png" and single.content[:4] == b"\x89PNG"
    assert re.fullmatch(r'attachment; filename="image_[0-9a-f]{8}\.png"', single.headers["content-disposition"])
    jpeg = http.post("/v1/images/generations", json={**body, "output_format": "tiff"})
    assert jpeg.headers["content-type"] == "image/jpeg" and jpeg.content[:2] == b"\xff\xd8"  # unknown -> JPEG
    many = http.post("/v1/images/generations", json={**body, "n": 2})
    assert many.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(many.content)) as archive:
        assert archive.namelist() == ["image_0.png", "image_1.png"]
        first, second = (archive.read(name) for name in archive.namelist())
    assert first != second  # seed, seed+1


# sync video ---------------------------------------------------------------------------------------------


def test_sync_video_answer_and_headers(http, tmp_path):
    response = http.post("/v1/videos/sync", files=multipart(form()))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "video/mp4"
    assert re.fullmatch(r"video_sync-[0-9a-f-]{36}", response.headers["x-request-id"])
    assert response.headers["x-model"] == "tiny"
    assert re.fullmatch(r"\d+\.\d{3}", response.headers["x-inference-time-s"])
    assert {"denoise", "vae_decode", "encode"} <= set(json.loads(response.headers["x-stage-durations"]))
    assert response.headers["x-peak-memory-mb"] == "0.000"
    video, probe = decode_mp4(tmp_path, response.content)
    assert video.frames.shape == (9, 96, 160, 3)
    assert probe["fps"] == 24 and video.sound is None
    # encoded once with vLLM-Omni's encoder settings (x264 writes them into the stream: ultrafast, crf 18)
    assert b"me=dia subme=0" in response.content and b"crf=18.0" in response.content


def test_frame_count_rules(http, tmp_path):
    """Omitted num_frames and seconds -> 1 frame; counts round *up* to 4k+1; seconds x fps without num_frames."""
    one = http.post("/v1/videos/sync", files=multipart(form(num_frames=None)))
    assert decode_mp4(tmp_path, one.content)[0].frames.shape[0] == 1
    six = http.post("/v1/videos/sync", files=multipart(form(num_frames="6")))
    assert decode_mp4(tmp_path, six.content)[0].frames.shape[0] == 9
    seconds = http.post("/v1/videos/sync", files=multipart(form(num_frames=None, seconds="1", fps="8")))
    video, probe = decode_mp4(tmp_path, seconds.content)
    assert video.frames.shape[0] == 9 and probe["fps"] == 8


def test_public_cookbook_style_request(http, assets, tmp_path):
    """Form strings, compact JSON captions, extra_params as a string, sound and a JPEG input_reference."""
    from PIL import Image

    caption = json.loads((assets / "prompts/image2video/rolling_ball_sound.json").read_text())
    negative = json.loads((assets / "negative_prompt.json").read_text())
    buffer = io.BytesIO()
    Image.open(assets / "images/rolling_ball.png").convert("RGB").save(buffer, format="JPEG")
    fields = form(prompt=json.dumps(caption, separators=(",", ":")),
                  negative_prompt=json.dumps(negative, separators=(",", ":")), generate_sound="true",
                  sound_duration=f"{9 / 24:.3f}", extra_params=json.dumps(EXTRA, separators=(",", ":")))
    response = http.post("/v1/videos/sync", headers={"Accept": "video/mp4"},
                         files=multipart(fields, {"input_reference": ("ball.jpg", buffer.getvalue(), "image/jpeg")}))
    assert response.status_code == 200, response.text
    video, probe = decode_mp4(tmp_path, response.content)
    assert video.frames.shape == (9, 96, 160, 3)
    assert probe["audio_rate"] == 48000 and probe["audio_channels"] == 2
    assert video.sound.shape[0] == 2 and video.sound.shape[1] > 0


def test_image_and_video_references(http, rgb_image, rgb_video, tmp_path):
    """An image reference is stretched to ``size``; data: URLs work; a video reference is sniffed by content."""
    upload = {"input_reference": ("ref.bin", png_bytes(rgb_image), "application/octet-stream")}  # 180x100
    sized = http.post("/v1/videos/sync", files=multipart(form(size="96x96"), upload))
    assert decode_mp4(tmp_path, sized.content)[0].frames.shape[1:3] == (96, 96)
    data_url = "data:image/png;base64," + base64.b64encode(png_bytes(rgb_image)).decode()
    by_url = http.post("/v1/videos/sync", files=multipart(form(image_reference=json.dumps({"image_url": data_url}))))
    assert by_url.status_code == 200, by_url.text
    clip = {"input_reference": ("clip.png", mp4_bytes(tmp_path, rgb_video), "image/png")}  # the name misleads
    fields = form(extra_params=json.dumps({**EXTRA, "condition_frame_indexes_vision": "0,1",
                                           "condition_video_keep": "last"}))
    response = http.post("/v1/videos/sync", files=multipart(fields, clip))
    assert response.status_code == 200, response.text
    assert decode_mp4(tmp_path, response.content)[0].frames.shape == (9, 96, 160, 3)


def test_guardrail_block_and_its_switch(http):
    blocked = http.post("/v1/videos/sync", files=multipart(form(prompt=f"a {BLOCK_WORD} scene")))
    assert assert_envelope(blocked, 400, type_=BAD)["message"] == "Input was blocked by Cosmos3 guardrails."
    # a *string* "false" is truthy on vLLM-Omni (bool() of a non-empty string): still blocked
    as_string = http.post("/v1/videos/sync", files=multipart(form(prompt=f"a {BLOCK_WORD} scene",
                                                                  extra_params='{"guardrails":"false"}')))
    assert_envelope(as_string, 400, "Input was blocked by Cosmos3 guardrails.")
    allowed = http.post("/v1/videos/sync", files=multipart(form(prompt=f"a {BLOCK_WORD} scene",
                                                               extra_params='{"guardrails":false}')))
    assert allowed.status_code == 200
    image = http.post("/v1/images/generations", json={"prompt": BLOCK_WORD, "size": "160x96", "num_inference_steps": 1})
    assert_envelope(image, 400, "Input was blocked by Cosmos3 guardrails.")


# async jobs ---------------------------------------------------------------------------------------------


def test_job_lifecycle_content_and_delete(http, storage):
    created = http.post("/v1/videos", files=multipart(form()))
    job = created.json()
    assert created.status_code == 200
    assert re.fullmatch(r"video_gen_[0-9a-f]{32}", job["id"])
    assert job["object"] == "video" and job["status"] == "queued" and job["progress"] == 0
    assert job["size"] == "160x96" and job["seconds"] == "4" and job["media_type"] == "video/mp4"
    assert job["completed_at"] is None and job["file_name"] is None and job["error"] is None
    assert isinstance(job["created_at"], int) and job["num_frames"] == 9 and job["duration_s"] == 9 / 24
    done = wait_status(http, job["id"], {"completed"})
    assert done["progress"] == 100 and done["file_name"] == f"{job['id']}.mp4" and done["inference_time_s"] > 0
    assert done["completed_at"] >= done["created_at"] and done["metrics"] is None  # not asked for
    assert {"denoise", "vae_decode", "encode"} <= set(done["stage_durations"])
    content = http.get(f"/v1/videos/{job['id']}/content")
    assert content.status_code == 200 and content.headers["content-type"] == "video/mp4"
    assert content.headers["content-disposition"] == f'attachment; filename="{job["id"]}.mp4"'
    assert (storage / f"{job['id']}.mp4").is_file()
    assert http.delete(f"/v1/videos/{job['id']}").json() == {"id": job["id"], "deleted": True,
                                                            "object": "video.deleted"}
    assert not (storage / f"{job['id']}.mp4").exists()
    assert http.get(f"/v1/videos/{job['id']}").status_code == 404


def test_failed_job(http):
    job = http.post("/v1/videos", files=multipart(form(prompt=f"{BLOCK_WORD}!"))).json()
    assert job["status"] == "queued"  # accepted: the guardrail runs when the job does
    wait_status(http, job["id"], {"failed"})
    response = http.get(f"/v1/videos/{job['id']}")
    assert response.status_code == 400  # a failed job answers GET with its failure code, the job as the body
    body = response.json()
    assert body["error"] == {"code": 400, "message": "Input was blocked by Cosmos3 guardrails."}
    assert body["completed_at"] is not None and body["file_name"] is None
    assert_envelope(http.get(f"/v1/videos/{job['id']}/content"), 422, "Video generation failed")
    assert http.delete(f"/v1/videos/{job['id']}").status_code == 200
