"""The local server against the vLLM-Omni 0.30.0 protocol, spoken to with raw HTTP (httpx) on loopback."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from cosmos_helpers import media

from .conftest import BLOCK_WORD, small_request

EXTRA = {"use_resolution_template": False, "use_duration_template": False, "guardrails": True}


def form(**overrides) -> dict[str, str]:
    fields = {"prompt": "a small robot crosses a workshop", "size": "160x96", "num_frames": "9", "fps": "24",
              "num_inference_steps": "2", "guidance_scale": "6.0", "flow_shift": "10.0", "seed": "0",
              "extra_params": json.dumps(EXTRA)}
    for key, value in overrides.items():
        if value is None:
            fields.pop(key, None)
        else:
            fields[key] = value
    return fields


def multipart(fields: dict[str, str], files: dict | None = None) -> list:
    """Every text field as its own multipart part (as curl --form-string and the openai SDK send them)."""
    parts = [(name, (None, value)) for name, value in fields.items()]
    for name, value in (files or {}).items():
        parts.append((name, value))
    return parts


def png_bytes(array: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def mp4_bytes(tmp_path: Path, frames: np.ndarray, fps: float = 24, sound=None) -> bytes:
    path = tmp_path / f"clip_{frames.shape[0]}_{int(time.time() * 1e6)}.mp4"
    media.write_mp4(path, frames, fps, sound=sound)
    return path.read_bytes()


def decode_mp4(tmp_path: Path, content: bytes):
    path = tmp_path / f"answer_{int(time.time() * 1e6)}.mp4"
    path.write_bytes(content)
    return media.read_video(path, with_audio=True), media.probe_video(path)


def assert_envelope(response, status: int, message_part: str, *, type_: str | None = None, param: str | None = None):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    assert error["code"] == status
    assert message_part in error["message"], error["message"]
    if type_ is not None:
        assert error["type"] == type_
    if param is not None:
        assert error["param"] == param
    return error


# health, models, envelope ------------------------------------------------------------------------------


def test_health_and_models(http):
    assert http.get("/health").json() == {"status": "healthy"}
    models = http.get("/v1/models").json()
    assert models["object"] == "list"
    entry = models["data"][0]
    assert entry["id"] == "tiny" and entry["object"] == "model" and entry["owned_by"] == "vllm"
    assert entry["root"] == "tiny" and entry["parent"] is None and isinstance(entry["permission"], list)


def test_unknown_route_uses_the_envelope(http):
    assert_envelope(http.get("/v1/nothing-here"), 404, "Not Found")


# validation: every documented error is a 400 in vLLM's envelope, never a 422 --------------------------------

VIDEO_ERRORS = [
    ({"prompt": None}, "Field required", "Bad Request", "body.prompt"),
    ({"size": "160*96"}, "String should match pattern", "Bad Request", "body.size"),
    ({"seconds": "0", "num_frames": None}, "String should match pattern", "Bad Request", "body.seconds"),
    ({"fps": "0.5"}, "greater than or equal to 1", "Bad Request", "body.fps"),
    ({"num_frames": "0"}, "greater than or equal to 1", "Bad Request", "body.num_frames"),
    ({"num_frames": "nine"}, "valid integer", "Bad Request", "body.num_frames"),
    ({"generate_sound": "maybe"}, "valid boolean", "Bad Request", "body.generate_sound"),
    ({"num_inference_steps": "201"}, "num_inference_steps", "BadRequestError", None),
    ({"guidance_scale": "21"}, "guidance_scale", "BadRequestError", None),
    ({"extra_params": "{not json"}, "Invalid JSON in form field 'extra_params'", "BadRequestError", None),
    ({"extra_params": "[1, 2]"}, "Invalid JSON in form field 'extra_params'", "BadRequestError", None),
    ({"lora": "nope"}, "Invalid JSON in form field 'lora'", "BadRequestError", None),
    ({"quality": "ultra"}, "quality", "BadRequestError", None),
    ({"model": "someone/else"}, "Model mismatch", "BadRequestError", None),
    ({"size": "100x96"}, "width: 100 is not a multiple of 16", "BadRequestError", "width"),
    ({"seed": "-3"}, "seed", "BadRequestError", "seed"),
    ({"control_type": "edge"}, "control_type was given without a control_reference", "BadRequestError", None),
    ({"extra_params": json.dumps({"control_guidance": 1.5})}, "is a transfer option", "BadRequestError", None),
    ({"extra_params": json.dumps({"condition_video_keep": "middle"})}, "condition_video_keep", "BadRequestError",
     None),
    ({"extra_params": json.dumps({"edge": {"control_weight": -1}})}, "control_weight", "BadRequestError", None),
    ({"extra_params": json.dumps({"edge": {"weight": 1}})}, "unknown field(s) weight", "BadRequestError", None),
    ({"extra_params": json.dumps({"negative_metadata_mode": "opposite"})}, "negative_metadata_mode",
     "BadRequestError", None),
    ({"image_reference": json.dumps({"file_id": "abc"})}, "file_id", "BadRequestError", None),
]


@pytest.mark.parametrize("route", ["/v1/videos/sync", "/v1/videos"])
@pytest.mark.parametrize("overrides,message,type_,param", VIDEO_ERRORS)
def test_video_validation_errors(http, route, overrides, message, type_, param):
    response = http.post(route, files=multipart(form(**overrides)))
    assert_envelope(response, 400, message, type_=type_, param=param)


def test_media_validation_errors(http, rgb_image, rgb_video, tmp_path):
    image = ("ref.png", png_bytes(rgb_image), "image/png")
    video = ("ref.mp4", mp4_bytes(tmp_path, rgb_video), "video/mp4")
    cases = [
        (form(), {"input_reference": ("x.png", b"definitely not media", "image/png")}, "Invalid input_reference"),
        (form(image_reference=json.dumps({"image_url": "data:image/png;base64,AAAA"})), {"input_reference": image},
         "cannot be combined"),
        (form(image_reference=json.dumps({"image_url": "data:image/png;base64,AA"}),
              video_reference=json.dumps({"video_url": "data:video/mp4;base64,AA"})), {}, "not both"),
        (form(), {"control_reference": video}, "control_reference needs control_type"),
        (form(control_type="normal"), {"control_reference": video}, "Unsupported control_type"),
        (form(control_type="edge", extra_params=json.dumps({"edge": {"control_path": "/x.mp4"}})),
         {"control_reference": video}, "already has a control/control_path"),
        (form(extra_params=json.dumps({"edge": True})), {"input_reference": video},
         "transfer is not enabled on this server"),
        (form(num_frames=None), {"input_reference": image}, "num_frames"),
    ]
    for fields, files, message in cases:
        assert_envelope(http.post("/v1/videos/sync", files=multipart(fields, files)), 400, message)


IMAGE_ERRORS = [
    ({"prompt": None}, "Field required", "body.prompt"),
    ({"n": 11}, "n must be from 1 to 10", None),
    ({"response_format": "url"}, "response_format", None),
    ({"size": "big"}, "String should match pattern", "body.size"),
    ({"num_inference_steps": 0}, "num_inference_steps", None),
    ({"guidance_scale": 25}, "guidance_scale", None),
    ({"output_compression": 101}, "output_compression", None),
    ({"extra_params": "guardrails=false"}, "valid dictionary", "body.extra_params"),
    ({"model": "someone/else"}, "Model mismatch", None),
]


@pytest.mark.parametrize("overrides,message,param", IMAGE_ERRORS)
def test_image_validation_errors(http, overrides, message, param):
    body = {"prompt": "a workshop", "size": "160x96", "num_inference_steps": 2, "seed": 0}
    for key, value in overrides.items():
        if value is None:
            body.pop(key)
        else:
            body[key] = value
    assert_envelope(http.post("/v1/images/generations", json=body), 400, message, param=param)


def test_image_route_needs_json(http):
    assert_envelope(http.post("/v1/images/generations", content=b"prompt=x",
                              headers={"content-type": "text/plain"}), 400, "application/json")
    assert_envelope(http.post("/v1/images/generations", content=b"{broken",
                              headers={"content-type": "application/json"}), 400, "JSON decode error")


def test_list_validation(http):
    assert_envelope(http.get("/v1/videos", params={"limit": 101}), 400, "between 0 and 100", param="query.limit")
    assert_envelope(http.get("/v1/videos", params={"order": "sideways"}), 400, "'asc' or 'desc'")
    assert_envelope(http.get("/v1/videos/video_gen_" + "0" * 32), 404, "Video not found")
    assert_envelope(http.get("/v1/videos/video_gen_" + "0" * 32 + "/content"), 404, "Video not found")
    assert_envelope(http.delete("/v1/videos/video_gen_" + "0" * 32), 404, "Video not found")


def test_action_keys_are_rejected_as_bad_input_not_a_server_fault(http):
    response = http.post("/v1/videos/sync", files=multipart(form(extra_params=json.dumps({"action_mode": "policy"}))))
    assert_envelope(response, 400, "action_mode: action modes need an action checkpoint")


# images --------------------------------------------------------------------------------------------------


def test_image_json_answer(http):
    body = {"prompt": "a workshop", "size": "160x96", "num_inference_steps": 2, "seed": 3,
            "extra_params": {"guardrails": True}, "extra_args": {"ignored": True}, "unknown_key": 1}
    answer = http.post("/v1/images/generations", json=body).json()
    assert set(answer) == {"created", "data", "output_format", "size", "cot_output", "metrics"}
    assert answer["size"] == "160x96" and answer["output_format"] == "png" and answer["cot_output"] is None
    item = answer["data"][0]
    assert item["url"] is None and item["revised_prompt"] is None
    raw = base64.b64decode(item["b64_json"])
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(answer["metrics"]) == {"stage_durations", "peak_memory_mb"}


def test_image_file_answers(http):
    body = {"prompt": "a workshop", "size": "160x96", "num_inference_steps": 1, "seed": 3, "response_format": "file"}
    single = http.post("/v1/images/generations", json=body)
    assert single.headers["content-type"] == "image/png" and single.content[:4] == b"\x89PNG"
    jpeg = http.post("/v1/images/generations", json={**body, "output_format": "tiff"})
    assert jpeg.headers["content-type"] == "image/jpeg"  # unknown formats silently become JPEG
    many = http.post("/v1/images/generations", json={**body, "n": 2})
    assert many.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(many.content)) as archive:
        names = archive.namelist()
        assert len(names) == 2
        first, second = (archive.read(name) for name in names)
    assert first != second  # seed, seed+1


# sync video ---------------------------------------------------------------------------------------------


def test_sync_video_answer_and_headers(http, tmp_path):
    response = http.post("/v1/videos/sync", files=multipart(form()))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "video/mp4"
    assert re.fullmatch(r"video_sync-[0-9a-f-]{36}", response.headers["x-request-id"])
    assert response.headers["x-model"] == "tiny"
    assert re.fullmatch(r"\d+\.\d{3}", response.headers["x-inference-time-s"])
    stages = json.loads(response.headers["x-stage-durations"])
    assert {"denoise", "vae_decode", "encode"} <= set(stages)
    assert re.fullmatch(r"\d+\.\d{3}", response.headers["x-peak-memory-mb"])
    video, probe = decode_mp4(tmp_path, response.content)
    assert video.frames.shape == (9, 96, 160, 3)
    assert probe["fps"] == 24 and video.sound is None


def test_frame_count_rules(http, tmp_path):
    """Omitted num_frames -> 1 frame (as vLLM); counts round *up* to 4k+1; seconds x fps when no num_frames."""
    one, _ = decode_mp4(tmp_path, http.post("/v1/videos/sync", files=multipart(form(num_frames=None))).content)
    assert one.frames.shape[0] == 1
    eight = http.post("/v1/videos/sync", files=multipart(form(num_frames="6")))
    assert decode_mp4(tmp_path, eight.content)[0].frames.shape[0] == 9
    seconds = http.post("/v1/videos/sync", files=multipart(form(num_frames=None, seconds="1", fps="8")))
    video, probe = decode_mp4(tmp_path, seconds.content)
    assert video.frames.shape[0] == 9 and probe["fps"] == 8


def test_public_cookbook_style_request(http, assets, tmp_path):
    """Form strings, compact JSON captions, extra_params string, sound and a JPEG input_reference."""
    from PIL import Image

    caption = json.loads((assets / "prompts/image2video/rolling_ball_sound.json").read_text())
    negative = json.loads((assets / "negative_prompt.json").read_text())
    buffer = io.BytesIO()
    Image.open(assets / "images/rolling_ball.png").convert("RGB").save(buffer, format="JPEG")
    fields = form(prompt=json.dumps(caption, separators=(",", ":")),
                  negative_prompt=json.dumps(negative, separators=(",", ":")),
                  generate_sound="true", sound_duration=f"{9 / 24:.3f}",
                  extra_params=json.dumps(EXTRA, separators=(",", ":")))
    response = http.post("/v1/videos/sync", files=multipart(fields, {"input_reference": ("ball.jpg",
                                                                                        buffer.getvalue(),
                                                                                        "image/jpeg")}),
                         headers={"Accept": "video/mp4"})
    assert response.status_code == 200, response.text
    video, probe = decode_mp4(tmp_path, response.content)
    assert video.frames.shape == (9, 96, 160, 3)
    assert probe["audio_rate"] == 48000 and probe["audio_channels"] == 2
    assert video.sound.shape[0] == 2 and video.sound.shape[1] > 0


def test_image_reference_sizes(http, rgb_image, tmp_path):
    """Without size the image's aspect picks the output size; with size the image is stretched to it."""
    upload = {"input_reference": ("ref.png", png_bytes(rgb_image), "image/png")}  # 180x100
    free = http.post("/v1/videos/sync", files=multipart(form(size=None), upload))
    assert decode_mp4(tmp_path, free.content)[0].frames.shape[1:3] == (80, 160)
    sized = http.post("/v1/videos/sync", files=multipart(form(size="96x96"), upload))
    assert decode_mp4(tmp_path, sized.content)[0].frames.shape[1:3] == (96, 96)
    data_url = "data:image/png;base64," + base64.b64encode(png_bytes(rgb_image)).decode()
    by_url = http.post("/v1/videos/sync", files=multipart(form(image_reference=json.dumps({"image_url": data_url}))))
    assert by_url.status_code == 200, by_url.text


def test_video_reference_upload(http, rgb_video, tmp_path):
    upload = {"input_reference": ("clip.bin", mp4_bytes(tmp_path, rgb_video), "application/octet-stream")}
    fields = form(extra_params=json.dumps({**EXTRA, "condition_frame_indexes_vision": "0,1",
                                           "condition_video_keep": "last"}))
    response = http.post("/v1/videos/sync", files=multipart(fields, upload))
    assert response.status_code == 200, response.text
    assert decode_mp4(tmp_path, response.content)[0].frames.shape == (9, 96, 160, 3)


def test_guardrail_block_and_its_switch(http):
    blocked = http.post("/v1/videos/sync", files=multipart(form(prompt=f"a {BLOCK_WORD} scene")))
    assert_envelope(blocked, 400, "Input was blocked by Cosmos3 guardrails.")
    assert blocked.json()["error"]["message"] == "Input was blocked by Cosmos3 guardrails."
    # a *string* "false" is truthy on vLLM-Omni (bool() of a non-empty string): still blocked
    as_string = http.post("/v1/videos/sync", files=multipart(form(prompt=f"a {BLOCK_WORD} scene",
                                                                  extra_params='{"guardrails":"false"}')))
    assert as_string.status_code == 400
    allowed = http.post("/v1/videos/sync", files=multipart(form(prompt=f"a {BLOCK_WORD} scene",
                                                               extra_params='{"guardrails":false}')))
    assert allowed.status_code == 200
    image = http.post("/v1/images/generations", json={"prompt": f"{BLOCK_WORD}", "size": "160x96",
                                                      "num_inference_steps": 1})
    assert_envelope(image, 400, "Input was blocked by Cosmos3 guardrails.")


# async jobs ---------------------------------------------------------------------------------------------


def wait_status(http, job_id: str, wanted: set[str], timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = http.get(f"/v1/videos/{job_id}")
        job = response.json()
        if job.get("status") in wanted:
            return job
        time.sleep(0.02)
    raise AssertionError(f"{job_id} never reached {wanted}")


def test_job_lifecycle_content_and_delete(http, storage):
    created = http.post("/v1/videos", files=multipart(form(seconds=None)))
    job = created.json()
    assert created.status_code == 200
    assert re.fullmatch(r"video_gen_[0-9a-f]{32}", job["id"])
    assert job["object"] == "video" and job["status"] == "queued" and job["progress"] == 0
    assert job["size"] == "160x96" and job["seconds"] == "4" and job["media_type"] == "video/mp4"
    assert job["completed_at"] is None and job["file_name"] is None and job["error"] is None
    assert isinstance(job["created_at"], int) and job["num_frames"] == 9 and job["duration_s"] == 9 / 24
    done = wait_status(http, job["id"], {"completed"})
    assert done["progress"] == 100 and done["file_name"] == f"{job['id']}.mp4" and done["completed_at"] >= \
        done["created_at"] and done["inference_time_s"] > 0
    content = http.get(f"/v1/videos/{job['id']}/content")
    assert content.status_code == 200 and content.headers["content-type"] == "video/mp4"
    assert content.headers["content-disposition"] == f'attachment; filename="{job["id"]}.mp4"'
    assert (storage / f"{job['id']}.mp4").is_file()
    deleted = http.delete(f"/v1/videos/{job['id']}")
    assert deleted.json() == {"id": job["id"], "deleted": True, "object": "video.deleted"}
    assert not (storage / f"{job['id']}.mp4").exists()
    assert http.get(f"/v1/videos/{job['id']}").status_code == 404


def test_in_progress_and_queued_jobs(http, server):
    slow = http.post("/v1/videos", files=multipart(form(num_inference_steps="40"))).json()
    queued = http.post("/v1/videos", files=multipart(form())).json()
    wait_status(http, slow["id"], {"in_progress"})
    assert http.get(f"/v1/videos/{queued['id']}").json()["status"] == "queued"
    assert_envelope(http.get(f"/v1/videos/{slow['id']}/content"), 404, "Generation is still in-progress")
    assert_envelope(http.get(f"/v1/videos/{queued['id']}/content"), 404, "Generation is still in-progress")
    assert http.delete(f"/v1/videos/{queued['id']}").json()["deleted"] is True  # never runs
    started = time.monotonic()
    assert http.delete(f"/v1/videos/{slow['id']}").json()["deleted"] is True  # aborted at its next step
    assert time.monotonic() - started < 4
    assert http.get(f"/v1/videos/{slow['id']}").status_code == 404
    time.sleep(0.3)
    assert queued["id"] not in server.app.state.worker.order_log


def test_failed_job(http):
    job = http.post("/v1/videos", files=multipart(form(prompt=f"{BLOCK_WORD}!"))).json()
    assert job["status"] == "queued"  # accepted; the guardrail runs when the job does
    deadline = time.monotonic() + 30
    while True:
        response = http.get(f"/v1/videos/{job['id']}")
        if response.json()["status"] == "failed" or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert response.status_code == 400  # a failed job answers GET with its failure code, body = the job
    body = response.json()
    assert body["error"] == {"code": 400, "message": "Input was blocked by Cosmos3 guardrails."}
    assert_envelope(http.get(f"/v1/videos/{job['id']}/content"), 422, "Video generation failed")
    assert http.delete(f"/v1/videos/{job['id']}").status_code == 200


def test_list_pagination(http):
    ids = [http.post("/v1/videos", files=multipart(form(num_inference_steps="1"))).json()["id"] for _ in range(3)]
    for job_id in ids:
        wait_status(http, job_id, {"completed"})
    page = http.get("/v1/videos", params={"limit": 2, "order": "asc"}).json()
    assert page["object"] == "list" and len(page["data"]) == 2 and page["has_more"] is True
    assert page["first_id"] == page["data"][0]["id"] and page["last_id"] == page["data"][1]["id"]
    everything, after = [], None
    while True:
        params = {"limit": 2, "order": "asc", **({"after": after} if after else {})}
        chunk = http.get("/v1/videos", params=params).json()
        everything += [job["id"] for job in chunk["data"]]
        if not chunk["has_more"]:
            break
        after = chunk["last_id"]
    assert everything[-3:] == ids
    newest = http.get("/v1/videos", params={"limit": 1}).json()  # default order: desc
    assert newest["data"][0]["id"] == ids[-1]
    assert http.get("/v1/videos", params={"after": "video_gen_unknown"}).json()["data"] == []
    for job_id in ids:
        http.delete(f"/v1/videos/{job_id}")


def test_eight_concurrent_jobs_run_one_at_a_time_in_fifo_order(server):
    from cosmos_helpers.backends.vllm_omni import AsyncVllmOmniBackend

    async def scenario():
        async with AsyncVllmOmniBackend(server.url, progress=False, poll_interval=0.05) as client:
            requests = [small_request(seed=i, num_inference_steps=1) for i in range(8)]
            jobs = await asyncio.gather(*(client.submit(r) for r in requests))
            finished = await asyncio.gather(*(client.wait(job["id"], timeout=120) for job in jobs))
            await asyncio.gather(*(client.delete(job["id"]) for job in jobs))
            return jobs, finished

    jobs, finished = asyncio.run(scenario())
    by_id = {job["id"]: job for job in finished}
    order_log = [key for key in server.app.state.worker.order_log if key in by_id]
    # arrival order on the server = creation order (created_at ties are broken by arrival sequence)
    created_order = [job["id"] for job in sorted(jobs, key=lambda j: (j["created_at"], order_log.index(j["id"])))]
    assert order_log == created_order and len(order_log) == 8
    spans = [(by_id[key]["metrics"]["started_at"], by_id[key]["metrics"]["finished_at"]) for key in order_log]
    for (start_a, end_a), (start_b, _) in zip(spans, spans[1:]):
        assert start_b >= end_a  # never two at once
    completed = [by_id[key]["completed_at"] for key in order_log]
    assert completed == sorted(completed)


# other app configurations ---------------------------------------------------------------------------------


def test_sync_timeout_counts_queueing(storage):
    from cosmos_helpers.backends.vllm_omni import VllmOmniBackend
    from cosmos_helpers.errors import GenerationTimeoutError
    from cosmos_helpers.server.local import ThreadedServer

    import httpx

    import threading

    with ThreadedServer(storage_dir=storage / "timeout", sync_timeout=0.3) as slow:
        # a generation already running holds the serial worker, so these requests only wait in the queue:
        # the timeout must count that wait (deterministic, whatever this machine's speed)
        release = threading.Event()
        blocker = slow.app.state.worker.submit("blocker", lambda _ctx: release.wait(60))
        try:
            response = httpx.post(f"{slow.url}/v1/videos/sync", files=multipart(form(num_inference_steps="2")),
                                  timeout=30)
            assert_envelope(response, 504, "Video generation timed out after 0.3s")
            with pytest.raises(GenerationTimeoutError, match="504"):
                VllmOmniBackend(slow.url, progress=False).generate(small_request(num_inference_steps=2))
        finally:
            release.set()
        blocker.result(timeout=30)
        deadline = time.monotonic() + 30
        while (slow.app.state.worker.current or not slow.app.state.worker._queue.empty()) and \
                time.monotonic() < deadline:
            time.sleep(0.05)  # let the abandoned generations finish before the next server uses the pipeline


def test_api_key(storage):
    import httpx

    from cosmos_helpers.server.local import ThreadedServer

    with ThreadedServer(storage_dir=storage / "auth", api_key="s3cret") as locked:
        assert httpx.get(f"{locked.url}/health").status_code == 200  # health is open
        assert_envelope(httpx.get(f"{locked.url}/v1/models"), 401, "Unauthorized")
        assert_envelope(httpx.get(f"{locked.url}/v1/models", headers={"Authorization": "Bearer nope"}), 401,
                        "Unauthorized")
        ok = httpx.get(f"{locked.url}/v1/models", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200


def test_transfer_hook_receives_uploads(storage, rgb_video, tmp_path):
    import httpx

    from cosmos_helpers import Generation
    from cosmos_helpers.server.local import ThreadedServer

    seen: dict = {}

    def runner(form_fields, extra_params, rgb_video_path, control_paths):
        seen.update(form=form_fields, extra=extra_params, rgb=rgb_video_path, controls=control_paths,
                    rgb_exists=rgb_video_path.is_file(), control_exists=control_paths["edge"].is_file())
        frames = media.read_video(control_paths["edge"]).frames
        return Generation(frames=frames, fps=24.0, seed=0, backend="transfer-test")

    with ThreadedServer(storage_dir=storage / "transfer", transfer_runner=runner) as hooked:
        fields = form(control_type="edge", extra_params=json.dumps({"edge": {"control_weight": 0.5},
                                                                    "control_guidance": 1.5}))
        files = {"input_reference": ("rgb.mp4", mp4_bytes(tmp_path, rgb_video), "video/mp4"),
                 "control_reference": ("edge.mp4", mp4_bytes(tmp_path, rgb_video[:5]), "video/mp4")}
        response = httpx.post(f"{hooked.url}/v1/videos/sync", files=multipart(fields, files), timeout=60)
        assert response.status_code == 200, response.text
        assert decode_mp4(tmp_path, response.content)[0].frames.shape[0] == 5
        assert seen["rgb_exists"] and seen["control_exists"]
        assert seen["extra"]["edge"] == {"control_weight": 0.5, "control_path": str(seen["controls"]["edge"])}
        assert seen["extra"]["control_guidance"] == 1.5
        assert all(isinstance(value, str) for value in seen["form"].values())
        assert not seen["rgb"].exists() and not seen["controls"]["edge"].exists()  # uploads cleaned up


def test_a_job_failing_inside_the_worker(storage, rgb_video, tmp_path):
    """A run-time failure: the job ends `failed` with code 500; GET answers 500 with the job; the client
    raises JobFailedError carrying the record; a sync call gets 500 `Video generation failed: ...`."""
    import httpx

    from cosmos_helpers.backends.vllm_omni import VllmOmniBackend, error_from_response
    from cosmos_helpers.errors import JobFailedError, ServerError
    from cosmos_helpers.server.local import ThreadedServer

    def runner(form_fields, extra_params, rgb_video_path, control_paths):
        raise RuntimeError("control video has no frames")

    with ThreadedServer(storage_dir=storage / "failing", transfer_runner=runner) as failing:
        fields = form(extra_params=json.dumps({"edge": True}))
        files = {"input_reference": ("rgb.mp4", mp4_bytes(tmp_path, rgb_video), "video/mp4")}
        sync = httpx.post(f"{failing.url}/v1/videos/sync", files=multipart(fields, files), timeout=60)
        assert_envelope(sync, 500, "Video generation failed: RuntimeError: control video has no frames")
        job = httpx.post(f"{failing.url}/v1/videos", files=multipart(fields, files), timeout=60).json()
        client = VllmOmniBackend(failing.url, progress=False, poll_interval=0.05)
        with pytest.raises(JobFailedError, match="no frames") as caught:
            client.wait(job["id"], timeout=30)
        assert caught.value.job["error"]["code"] == 500
        assert httpx.get(f"{failing.url}/v1/videos/{job['id']}").status_code == 500
        error = error_from_response(sync.status_code, sync.content, sync.headers)
        assert type(error) is ServerError and error.status == 500
