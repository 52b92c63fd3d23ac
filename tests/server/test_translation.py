"""What the stand-in makes of a request: the ``GenerationRequest`` its backend receives must carry the values real
vLLM-Omni 0.30.0 would use. Expected values come from the contract fixture (read from the real wheel) or from the
upstream rule written out here, never from the stand-in's own tables. The model-free double records each request.
"""

from __future__ import annotations

import json

import httpx
import pytest

from cosmos_helpers import Generation, media

from .conftest import assert_envelope, instant_server, mp4_bytes, multipart, png_bytes, wait_status
from .doubles import InstantBackend

TINY = {"prompt": "a robot", "size": "32x32", "num_frames": "5", "num_inference_steps": "1", "seed": "1"}


@pytest.fixture(scope="module")
def constants():
    from tests.contracts.conftest import load

    return load("vllm_omni")["cosmos3"]["pipeline_constants"]


@pytest.fixture(scope="module")
def recorder(tmp_path_factory):
    backend = InstantBackend()
    with instant_server(tmp_path_factory.mktemp("translation"), backend, guardrails=True) as server:
        server.backend = backend
        yield server


def video(server, fields: dict, files: dict | None = None, route: str = "/v1/videos/sync"):
    response = httpx.post(server.url + route, files=multipart(fields, files), timeout=60)
    assert response.status_code == 200, response.text
    return server.backend.last


def image(server, body: dict):
    response = httpx.post(server.url + "/v1/images/generations", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return server.backend.last


# defaults for what a request leaves out --------------------------------------------------------------------


def test_video_defaults_are_vllms(recorder, constants):
    request = video(recorder, {"prompt": "a robot", "num_frames": "5"})
    assert (request.width, request.height) == (constants["COSMOS3_T2V_DEFAULT_WIDTH"],
                                               constants["COSMOS3_T2V_DEFAULT_HEIGHT"])
    assert request.num_inference_steps == constants["COSMOS3_T2V_DEFAULT_NUM_INFERENCE_STEPS"]
    assert request.guidance_scale == constants["COSMOS3_T2V_DEFAULT_GUIDANCE_SCALE"]
    assert request.flow_shift == constants["COSMOS3_VIDEO_DEFAULT_FLOW_SHIFT"]
    assert request.fps == 24.0 and request.model == "tiny" and request.mode == "text2video"
    assert request.negative_prompt_text() == ""  # vLLM's empty negative prompt, sent explicitly
    assert request.guidance_interval is None  # video: classifier-free guidance at every step
    assert request.use_system_prompt is False  # only video2video turns it on
    assert request.add_resolution_template is False and request.add_duration_template is False
    assert request.guardrails is True and 0 <= request.seed <= 2**31 - 1


def test_omitted_frames_make_one_frame_with_the_video_settings(recorder, constants):
    request = video(recorder, {"prompt": "a robot", "size": "32x32", "num_inference_steps": "1"})
    assert request.num_frames == 1 and request.mode == "text2image"
    assert request.guidance_scale == constants["COSMOS3_T2V_DEFAULT_GUIDANCE_SCALE"]
    assert request.flow_shift == constants["COSMOS3_VIDEO_DEFAULT_FLOW_SHIFT"] and request.guidance_interval is None


def test_image_defaults_are_vllms(recorder, constants):
    request = image(recorder, {"prompt": "a robot"})
    assert (request.width, request.height) == (constants["COSMOS3_T2I_DEFAULT_WIDTH"],
                                               constants["COSMOS3_T2I_DEFAULT_HEIGHT"])
    assert request.num_inference_steps == constants["COSMOS3_T2I_DEFAULT_NUM_INFERENCE_STEPS"]
    assert request.guidance_scale == constants["COSMOS3_T2I_DEFAULT_GUIDANCE_SCALE"]
    assert request.flow_shift == constants["COSMOS3_T2I_DEFAULT_FLOW_SHIFT"]
    assert list(request.guidance_interval) == constants["COSMOS3_T2I_DEFAULT_GUIDANCE_INTERVAL"]  # [400, 1000]
    assert request.use_system_prompt is False and request.negative_prompt_text() == ""
    assert 0 <= request.seed <= 2**32 - 1


def test_edge_checkpoint_defaults(tmp_path, constants):
    backend = InstantBackend()
    with instant_server(tmp_path, backend, model="nvidia/Cosmos3-Edge") as server:
        server.backend = backend
        request = video(server, {"prompt": "a robot", "num_frames": "5", "num_inference_steps": "1"})
        assert (request.width, request.height) == (constants["COSMOS3_EDGE_T2V_DEFAULT_WIDTH"],
                                                   constants["COSMOS3_EDGE_T2V_DEFAULT_HEIGHT"])
        assert request.guidance_scale == constants["COSMOS3_EDGE_T2V_DEFAULT_GUIDANCE_SCALE"]
        assert request.flow_shift == constants["COSMOS3_EDGE_VIDEO_DEFAULT_FLOW_SHIFT"]
        assert request.model == "nvidia/Cosmos3-Edge"
        still = image(server, {"prompt": "a robot", "num_inference_steps": 1})
        assert (still.width, still.height) == (constants["COSMOS3_EDGE_T2I_DEFAULT_WIDTH"],
                                               constants["COSMOS3_EDGE_T2I_DEFAULT_HEIGHT"])


# what a request sets ---------------------------------------------------------------------------------------


def test_guidance_interval_is_the_requests_own(recorder):
    assert image(recorder, {"prompt": "x", "size": "32x32", "num_inference_steps": 1,
                            "extra_params": {"guidance_interval": [0, 1000]}}).guidance_interval == (0.0, 1000.0)
    extra = json.dumps({"guidance_interval": [200, 800]})
    assert video(recorder, {**TINY, "extra_params": extra}).guidance_interval == (200.0, 800.0)


@pytest.mark.parametrize("body,expected", [
    ({}, False),
    ({"use_system_prompt": "en_vanilla"}, True),
    ({"use_system_prompt": "custom", "extra_params": {"use_system_prompt": False}}, True),  # top level wins
    ({"extra_params": {"use_system_prompt": True}}, True),
    ({"extra_params": {"use_system_prompt": "false"}}, True),  # bool() of a non-empty string
])
def test_image_system_prompt_switch(recorder, body, expected):
    request = image(recorder, {"prompt": "x", "size": "32x32", "num_inference_steps": 1, **body})
    assert request.use_system_prompt is expected


def test_video_switches_and_overrides(recorder, rgb_video, tmp_path):
    extra = {"use_system_prompt": "no", "use_resolution_template": True, "use_duration_template": 1,
             "flow_shift": 2.5, "generate_sound": True, "guardrails": False}
    request = video(recorder, {**TINY, "flow_shift": "7", "extra_params": json.dumps(extra)})
    assert request.use_system_prompt is True  # bool("no")
    assert request.add_resolution_template is True and request.add_duration_template is True
    assert request.flow_shift == 2.5 and request.sound is True  # extra_params wins over the form for video
    assert request.guardrails is False
    caption = json.dumps({"subject": "a robot"})
    structured = video(recorder, {**TINY, "prompt": caption, "extra_params": json.dumps(extra)})
    assert structured.add_resolution_template is False  # a JSON caption gets metadata, never the templates
    clip = {"input_reference": ("clip.mp4", mp4_bytes(tmp_path, rgb_video[:, :32, :32]), "video/mp4")}
    v2v = video(recorder, {**TINY, "num_frames": "9"}, clip)
    assert v2v.mode == "video2video" and v2v.use_system_prompt is True  # vLLM's video2video default


def test_image_flow_shift_top_level_wins(recorder):
    request = image(recorder, {"prompt": "x", "size": "32x32", "num_inference_steps": 1, "flow_shift": 4.0,
                               "extra_params": {"flow_shift": 9.0}})
    assert request.flow_shift == 4.0
    assert image(recorder, {"prompt": "x", "size": "32x32", "num_inference_steps": 1,
                            "extra_params": {"flow_shift": 9.0}}).flow_shift == 9.0


def test_a_prompt_that_names_a_file_is_text(recorder, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret")
    request = video(recorder, {**TINY, "prompt": str(secret)})
    assert request.prompt_text() == str(secret)


def test_reference_without_size_takes_its_aspect_at_720p_area(recorder, rgb_image, rgb_video, tmp_path):
    """pipeline_cosmos3.py:621-625: H = round(sqrt(1280*720 * h/w)) // 16 * 16, W likewise; 180x100 -> 1280x704."""
    fields = {key: value for key, value in TINY.items() if key != "size"}
    request = video(recorder, fields, {"input_reference": ("ref.png", png_bytes(rgb_image), "image/png")})
    assert (request.width, request.height) == (1280, 704) and request.mode == "image2video"
    assert request.conditioning_image().size == (180, 100)  # not stretched: the pipeline fits it
    clip = {"input_reference": ("clip.mp4", mp4_bytes(tmp_path, rgb_video), "video/mp4")}
    assert (video(recorder, {**fields, "num_frames": "9"}, clip).width, recorder.backend.last.height) == (1280, 704)
    sized = video(recorder, TINY, {"input_reference": ("ref.png", png_bytes(rgb_image), "image/png")})
    assert sized.conditioning_image().size == (32, 32)  # with a size the serving layer stretches it


# jobs and listing ------------------------------------------------------------------------------------------


def test_job_metrics_only_when_asked(recorder):
    http = httpx.Client(base_url=recorder.url, timeout=30)
    plain = http.post("/v1/videos", files=multipart(TINY)).json()
    asked = http.post("/v1/videos", files=multipart({**TINY, "return_stage_metrics": "true"})).json()
    plain, asked = (wait_status(http, job["id"], {"completed"}) for job in (plain, asked))
    assert plain["metrics"] is None and plain["stage_durations"] and plain["peak_memory_mb"] == 0.0
    assert set(asked["metrics"]) >= {"stage_durations", "peak_memory_mb"}
    for job in (plain, asked):
        http.delete(f"/v1/videos/{job['id']}")


def test_list_has_no_default_limit_and_is_newest_first(tmp_path):
    with instant_server(tmp_path) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        ids = [http.post("/v1/videos", files=multipart(TINY)).json()["id"] for _ in range(25)]
        listed = http.get("/v1/videos").json()
        assert len(listed["data"]) == 25 and listed["has_more"] is False  # vLLM: no limit unless asked
        created = {job["id"]: job["created_at"] for job in listed["data"]}
        # vLLM sorts by created_at (whole seconds) with a stable sort: ties keep arrival order, even descending
        expected = sorted(ids, key=lambda job_id: created[job_id], reverse=True)
        assert [job["id"] for job in listed["data"]] == expected
        page = http.get("/v1/videos", params={"limit": 10, "order": "asc"}).json()
        assert page["has_more"] is True and page["first_id"] == sorted(ids, key=created.get)[0]


# transfer --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def transfer_server(tmp_path_factory):
    seen: list = []

    def runner(form_fields, extra_params, rgb_video_path, control_paths):
        seen.append(dict(form=form_fields, extra=extra_params, rgb=rgb_video_path, controls=control_paths,
                         rgb_exists=bool(rgb_video_path and rgb_video_path.is_file()),
                         controls_exist=all(path.is_file() for path in control_paths.values())))
        source = next(iter(control_paths.values()), rgb_video_path)
        return Generation(frames=media.read_video(source).frames, fps=24.0, seed=0, backend="transfer-double")

    backend = InstantBackend()
    with instant_server(tmp_path_factory.mktemp("transfer"), backend, transfer_runner=runner) as server:
        server.seen, server.backend = seen, backend
        yield server


def test_transfer_hook_receives_the_validated_request(transfer_server, rgb_video, tmp_path):
    fields = {**TINY, "num_frames": "9", "control_type": "edge",
              "extra_params": json.dumps({"edge": {"control_weight": 0.5, "preset_edge_threshold": "none"},
                                          "control_guidance": 1.5})}
    files = {"input_reference": ("rgb.mp4", mp4_bytes(tmp_path, rgb_video), "video/mp4"),
             "control_reference": ("edge.mp4", mp4_bytes(tmp_path, rgb_video[:5]), "video/mp4")}
    response = httpx.post(transfer_server.url + "/v1/videos/sync", files=multipart(fields, files), timeout=60)
    assert response.status_code == 200, response.text
    seen = transfer_server.seen[-1]
    assert seen["rgb_exists"] and seen["controls_exist"]  # persisted for the runner ...
    assert seen["extra"]["edge"] == {"control_weight": 0.5, "preset_edge_threshold": "none",  # "none" is vLLM's
                                     "control_path": str(seen["controls"]["edge"])}
    assert seen["extra"]["control_guidance"] == 1.5
    assert seen["form"] == {key: value for key, value in fields.items() if key != "extra_params"} | {
        "extra_params": fields["extra_params"]}  # the text parts as sent
    assert not seen["rgb"].exists() and not seen["controls"]["edge"].exists()  # ... and removed afterwards


def test_a_finished_file_is_returned_as_produced(tmp_path, rgb_video):
    """A runner (or backend) that made its own MP4: the answer is those bytes, not a re-encode of the frames."""
    from cosmos_helpers.result import FinishedFile

    produced = mp4_bytes(tmp_path, rgb_video[:5, :32, :32], fps=10)

    def runner(form_fields, extra_params, rgb_video_path, control_paths):
        return Generation(frames=rgb_video[:5, :32, :32], fps=10.0, seed=0, finished=FinishedFile(".mp4",
                                                                                                  data=produced))

    with instant_server(tmp_path / "store", transfer_runner=runner) as server:
        rgb = {"input_reference": ("rgb.mp4", mp4_bytes(tmp_path, rgb_video[:, :32, :32]), "video/mp4")}
        fields = {**TINY, "extra_params": json.dumps({"edge": True})}
        response = httpx.post(server.url + "/v1/videos/sync", files=multipart(fields, rgb), timeout=60)
        assert response.status_code == 200 and response.content == produced
        job = httpx.post(server.url + "/v1/videos", files=multipart(fields, rgb), timeout=60).json()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            wait_status(http, job["id"], {"completed"})
            assert http.get(f"/v1/videos/{job['id']}/content").content == produced


def test_transfer_refusals(transfer_server, rgb_image, rgb_video, tmp_path):
    rgb = {"input_reference": ("rgb.mp4", mp4_bytes(tmp_path, rgb_video), "video/mp4")}
    edge = json.dumps({"edge": True})
    url = transfer_server.url + "/v1/videos/sync"
    assert_envelope(httpx.post(url, files=multipart({**TINY, "extra_params": edge, "generate_sound": "true"}, rgb)),
                    400, "transfer does not generate sound", param="generate_sound")
    picture = {"input_reference": ("rgb.png", png_bytes(rgb_image), "image/png")}
    assert_envelope(httpx.post(url, files=multipart({**TINY, "extra_params": edge}, picture)), 400,
                    "accepts video inputs, not images")
    assert_envelope(httpx.post(url, files=multipart({**TINY, "extra_params": json.dumps({"depth": True})}, rgb)),
                    400, "only edge and blur support")
    assert list((transfer_server.app.state.server.upload_dir).glob("*")) == []  # nothing left behind


def test_resolution_does_not_make_a_transfer(transfer_server):
    before = len(transfer_server.seen)
    for key in ("resolution", "image_size"):
        request = video(transfer_server, {**TINY, "extra_params": json.dumps({key: "480"})})
        assert request.mode == "text2video"
    assert len(transfer_server.seen) == before


def test_transfer_is_refused_without_a_runner(recorder, rgb_video, tmp_path):
    rgb = {"input_reference": ("rgb.mp4", mp4_bytes(tmp_path, rgb_video), "video/mp4")}
    response = httpx.post(recorder.url + "/v1/videos/sync",
                          files=multipart({**TINY, "extra_params": json.dumps({"blur": True})}, rgb))
    assert_envelope(response, 400, "transfer is not enabled on this server")
