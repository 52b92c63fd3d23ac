"""Action-conditioned generation: the upstream facts (against ``fixtures/action_facts-*.json``, read from the
installed diffusers, the cosmos-framework checkout and the vllm-omni wheel), the request's checks, the trajectory
helpers, and the three modes on the embedded tiny model in-process and through the framework stand-in."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from cosmos_helpers import GenerationRequest
from cosmos_helpers.samples import render_drive, sample_trajectory
from cosmos_helpers.errors import ValidationError
from cosmos_helpers.presets import ACTION_MODES, PROFILES
from cosmos_helpers.protocol import action as proto
from cosmos_helpers.protocol import framework as fw
from cosmos_helpers.trajectories import (denormalize, integrate, load_trajectory, matrix_to_quaternion,
                                         matrix_to_rot6d, normalize, quaternion_to_matrix, rot6d_to_matrix,
                                         save_trajectory, step_errors, yaw_matrix)

FIXTURE = json.loads(next((Path(__file__).parent / "contracts/fixtures").glob("action_facts-*.json")).read_text())
START = render_drive(sample_trajectory("av", 8), 64, 48)  # 9 frames, 64x48: small, never upscaled


# ---------------------------------------------------------------------------------------------- upstream facts


@pytest.fixture(scope="module")
def diffusers_backend():
    from cosmos_helpers.backends.diffusers import DiffusersBackend

    return DiffusersBackend(progress=False)



def test_tables_are_the_upstream_ones():
    tables = FIXTURE["diffusers"]["tables"]
    assert dict(proto.DIFFUSERS_DOMAIN_ID) == tables["_EMBODIMENT_TO_DOMAIN_ID"]
    assert dict(proto.DIFFUSERS_RAW_DIM) == tables["_EMBODIMENT_TO_RAW_ACTION_DIM"]
    assert {t: {r: list(s) for r, s in b.items()} for t, b in proto.RESOLUTION_BINS.items()} == \
        tables["_ACTION_RESOLUTION_BINS"]
    assert set(proto.VIEW_POINTS) == set(tables["_ACTION_VIEWPOINT_TEMPLATES"])
    assert proto.DEFAULT_VIEW_POINT == FIXTURE["diffusers"]["CosmosActionCondition"]["view_point"]
    assert dict(proto.FRAMEWORK_DOMAIN_ID) == FIXTURE["framework"]["EMBODIMENT_TO_DOMAIN_ID"]
    assert dict(proto.FRAMEWORK_RAW_DIM) == FIXTURE["framework"]["EMBODIMENT_TO_RAW_ACTION_DIM"]
    assert dict(proto.VLLM_DOMAIN_ID) == FIXTURE["vllm_omni"]["EMBODIMENT_TO_DOMAIN_ID"]
    assert sorted(proto.MODES) == FIXTURE["vllm_omni"]["ACTION_MODES"]
    assert set(proto.FRAMEWORK_MODES.values()) <= set(FIXTURE["framework"]["model_modes"].values())
    assert proto.NORMALIZATION == tuple(FIXTURE["framework"]["normalization_methods"])
    assert FIXTURE["framework"]["inference_action_normalizer"] == ["None"]  # raw units at inference


def test_clip_timing_is_the_frameworks():
    from tests.contracts.conftest import load

    for name, example in load("cosmos_framework")["example_inputs"].items():
        if name.startswith("action_"):
            assert proto.TIMING[example["domain_name"]] == (example["action_chunk_size"], example["fps"]), name
    for embodiment, timing in FIXTURE["framework"]["dataset_timing"].items():
        assert proto.TIMING[embodiment] == (timing["chunk_length"], timing["fps"]), embodiment


def test_embodiments_both_stacks_list_have_one_width():
    both = set(proto.DIFFUSERS_RAW_DIM) & set(proto.FRAMEWORK_RAW_DIM)
    assert all(proto.DIFFUSERS_RAW_DIM[e] == proto.FRAMEWORK_RAW_DIM[e] for e in both)
    for name, widths in FIXTURE["framework"]["normalizer_stats_widths"].items():  # the training stats' widths
        if name == "bridge_orig_lerobot_stats":
            assert widths["q01"] == proto.RAW_DIM["bridge_orig_lerobot"]


def test_tiny_has_the_transformer_parts_action_runs_need(diffusers_backend):
    from cosmos_helpers.models.tiny import ACTION_CONFIG

    model = diffusers_backend.pipeline("tiny").transformer
    names = sorted(n for n, _ in model.named_parameters() if "action" in n)
    assert names == FIXTURE["diffusers"]["transformer_action_parameters"]
    assert ACTION_CONFIG["num_embodiment_domains"] > max(proto.DIFFUSERS_DOMAIN_ID.values())
    assert ACTION_CONFIG["action_dim"] >= max(proto.DIFFUSERS_RAW_DIM.values())


@pytest.mark.parametrize("size", [(48, 64), (180, 320), (720, 1280), (1000, 300), (256, 256)])
def test_closest_canvas_is_diffusers_choice(size):
    from diffusers.video_processor import VideoProcessor

    for tier in proto.TIERS:
        bins = {r: tuple(s) for r, s in proto.RESOLUTION_BINS[tier].items()}
        assert proto.closest_bin(tier, *size) == VideoProcessor.classify_height_width_bin(*size, ratios=bins)


# ---------------------------------------------------------------------------------------------- the request


def _fd(**changes):
    values = dict(mode="forward_dynamics", prompt="drive ahead", image=START[0], embodiment="av",
                  actions=sample_trajectory("av", 8))
    values.update(changes)
    return GenerationRequest(**values).resolve()


def test_a_trajectory_sets_the_length_and_the_start_image_the_size():
    request = _fd()
    assert (request.num_frames, request.tier, request.width, request.height) == (9, "256", 64, 48)
    assert request.actions.shape == (8, 9) and request.is_action
    assert _fd(actions=sample_trajectory("av", 16)).num_frames == 17
    assert GenerationRequest(mode="wam", prompt="p", image=START[0], embodiment="umi").resolve().mode == "policy"
    defaults = PROFILES["nano"].defaults("policy")
    assert (defaults.num_inference_steps, defaults.guidance_scale, defaults.tier) == (30, 1.0, "256")
    assert set(ACTION_MODES) <= set(PROFILES["tiny"].modes)


BAD = [
    ({"actions": np.zeros((8, 10))}, "actions", "av actions have 9"),
    ({"actions": np.zeros((7, 9))}, "actions", "4 or 8 steps"),
    ({"actions": np.zeros((8, 9)), "num_frames": 17}, "actions", "give 16 rows"),
    ({"actions": np.where(np.eye(8, 9) > 0, np.nan, 0.0)}, "actions", "row 0, value 0 is nan"),
    ({"actions": np.zeros(8)}, "actions", "(T, D)"),
    ({"actions": None}, "actions", "none was given"),
    ({"actions": "trajectory.parquet"}, "actions", "does not exist"),
    ({"image": None}, "image", "needs an image"),
    ({"image": None, "video": START}, "video", "pass its first frame as image="),
    ({"embodiment": None}, "embodiment", "pass embodiment="),
    ({"embodiment": "libero"}, "embodiment", "unknown embodiment"),
    ({"tier": "128"}, "tier", "256, 480, 704, 720"),
    ({"width": 64, "height": 48}, "width", "choose tier="),
    ({"view_point": "top"}, "view_point", "ego_view"),
    ({"sound": True}, "sound", "drop sound="),
    ({"prompt": {"scene": "a road"}}, "prompt", "plain instruction"),
    ({"mode": "policy"}, "actions", "predicts the actions"),
    ({"mode": "inverse_dynamics", "image": None, "video": START, "num_frames": 13, "actions": None}, "video",
     "num_frames=9"),
    ({"mode": "text2video", "image": None, "actions": None}, "embodiment", "takes no embodiment"),
]


@pytest.mark.parametrize("changes, field, fix", BAD, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD)])
def test_bad_action_input_names_the_field_and_the_fix(changes, field, fix):
    with pytest.raises(ValidationError) as caught:
        _fd(**changes)
    assert caught.value.field == field and fix in str(caught.value)


def test_a_lerobot_parquet_trajectory_needs_pyarrow_and_says_how_to_get_it(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    path = save_trajectory(tmp_path / "trajectory.parquet", sample_trajectory("av", 8), fps=10)
    assert np.array_equal(_fd(actions=str(path)).actions, sample_trajectory("av", 8))
    for name in ("pyarrow", "pyarrow.parquet", "pyarrow.compute"):
        monkeypatch.setitem(sys.modules, name, None)  # as where pyarrow is not installed
    with pytest.raises(ValidationError) as caught:
        _fd(actions=str(path))
    assert caught.value.field == "actions" and "needs pyarrow" in str(caught.value)
    assert "pip install pyarrow" in str(caught.value)


# ---------------------------------------------------------------------------------------------- trajectories


def test_rotations_round_trip_and_paths_integrate():
    rng = np.random.default_rng(0)
    quats = rng.normal(size=(20, 4))
    matrices = quaternion_to_matrix(quats)
    assert np.allclose(rot6d_to_matrix(matrix_to_rot6d(matrices)), matrices, atol=1e-9)
    back = matrix_to_quaternion(matrices)
    unit = quats / np.linalg.norm(quats, axis=1, keepdims=True)
    assert np.allclose(np.abs((back * unit).sum(1)), 1.0)
    square = np.zeros((4, 9))
    square[:, 0] = 1.0
    square[:, 3:9] = matrix_to_rot6d(yaw_matrix(np.full(4, np.pi / 2)))
    assert np.allclose(integrate(square), [[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 0]], atol=1e-9)


def test_files_round_trip_and_errors_measure_the_difference(tmp_path):
    given = sample_trajectory("bridge_orig_lerobot", 16)
    for name in ("a.json", "a.npz"):
        save_trajectory(tmp_path / name, given)
        assert np.array_equal(load_trajectory(tmp_path / name), given)  # float32 values kept exactly
    with pytest.raises(Exception):
        save_trajectory(tmp_path / "a.json", given)  # nothing is silently overwritten
    errors = step_errors(given, given)
    assert all(np.allclose(v, 0, atol=1e-4) for v in errors.values()) and set(errors) == {
        "translation", "rotation_deg", "path", "grasp"}
    shifted = given.copy()
    shifted[:, 0] += 0.1
    assert np.allclose(step_errors(shifted, given)["translation"], 0.1, atol=1e-6)
    stats = {"q01": given.min(0) - 1, "q99": given.max(0) + 1}
    assert np.allclose(denormalize(normalize(given, stats), stats), given, atol=1e-5)


# ---------------------------------------------------------------------------------------------- running


@pytest.mark.parametrize("mode", ACTION_MODES)
def test_each_mode_runs_on_the_tiny_model(diffusers_backend, mode):
    values = dict(mode=mode, prompt="drive ahead", embodiment="av", num_inference_steps=2, num_frames=9)
    values.update(video=START) if mode == "inverse_dynamics" else values.update(image=START[0])
    if mode == "forward_dynamics":
        values["actions"] = sample_trajectory("av", 8)
    generation = diffusers_backend.generate(GenerationRequest(**values))
    assert generation.frames.shape == (9, 48, 64, 3)
    if mode == "forward_dynamics":
        assert generation.actions is None  # given, not predicted
    else:
        assert generation.actions.shape == (8, 9) and np.isfinite(generation.actions).all()
        assert generation.manifest()["actions"] == generation.actions.tolist()


@pytest.mark.slow
def test_an_action_sample_runs_unchanged_through_the_framework_backend(tmp_path, monkeypatch):
    from cosmos_helpers.transfer.runner import run_spec
    from cosmos_helpers.backends.framework import FrameworkBackend

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    video = tmp_path / "robot.mp4"
    from cosmos_helpers import media

    media.write_mp4(video, render_drive(sample_trajectory("bridge_orig_lerobot", 16), 64, 48), 5)
    sample = {"action_chunk_size": 16, "domain_name": "bridge_orig_lerobot", "fps": 5, "image_size": 480,
              "model_mode": "wam", "name": "policy_robot", "prompt": "Put the pot to the left of the purple item.",
              "seed": 0, "vision_path": str(video), "num_steps": 1, "view_point": "ego_view"}
    backend = FrameworkBackend.standin(work_dir=tmp_path / "runs", progress=False)
    generation = run_spec(sample, backend=backend, profile="nano", guardrails=False, out=tmp_path / "out")
    assert generation.frames.shape == (17, 48, 64, 3)
    assert generation.actions.shape == (16, 10)
    record = json.loads((Path(generation.provenance["output"]).parent / fw.SAMPLE_OUTPUTS).read_text())
    assert record["args"] == sample and np.allclose(record["outputs"][0]["content"]["action"], generation.actions)


# ---------------------------------------------------------------------------------------------- vLLM-Omni


def _action_requests():
    image, video = START[0], START
    yield GenerationRequest(mode="forward_dynamics", prompt="drive", image=image, embodiment="av",
                            actions=sample_trajectory("av", 8), num_inference_steps=2)
    yield GenerationRequest(mode="policy", prompt="drive", image=image, embodiment="av", num_inference_steps=2)
    yield GenerationRequest(mode="inverse_dynamics", prompt="drive", video=video, embodiment="av",
                            num_inference_steps=2)


def test_action_requests_are_valid_for_the_real_server():
    """The form the client submits, parsed as vLLM-Omni 0.30.0 parses it, validates against its request model; every
    extra_params key is one its Cosmos3 pipeline reads."""
    from jsonschema import Draft202012Validator

    from tests.backends.vllm_fake import FakeServer, client_for, request_form
    from tests.contracts.conftest import load
    from tests.contracts.test_vllm_client_contract import _check_extra_params, _check_read, _form_value

    contract = load("vllm_omni")
    parameters = {p["name"]: p for p in contract["video_form_fields"]}
    for request in _action_requests():
        server = FakeServer()
        client_for(server).submit(request)
        (post,) = [r for r in server.requests if r.method == "POST"]
        assert post.url.path == "/v1/videos"  # a job: the actions come in its record
        fields, files = request_form(post)
        typed = {name: _form_value(parameters[name], value) for name, value in fields.items()}
        Draft202012Validator(contract["schemas"]["VideoGenerationRequest"]).validate(typed)
        _check_read(set(fields), contract, "VideoGenerationRequest")
        _check_extra_params(typed["extra_params"], contract)
        extra = typed["extra_params"]
        assert set(proto.VLLM_EXTRA_KEYS) >= set(extra) - {"guardrails"}
        assert (extra["action_mode"], extra["domain_name"], extra["action_chunk_size"]) == (request.mode, "av", 8)
        assert extra["raw_action_dim"] == 9 and typed["num_frames"] == 9 and set(files) == {"input_reference"}
        assert ("action" in extra) == (request.mode == "forward_dynamics")
    response = contract["schemas"]["VideoResponse"]
    assert "action" in response["properties"] and {"data", "shape", "raw_action_dim"} <= set(
        response["$defs"]["VideoAction"]["properties"])


def test_the_vllm_client_refuses_what_the_server_cannot_honour():
    from cosmos_helpers.backends.vllm_wire import check_action, refuse_sync_action

    with pytest.raises(ValidationError, match="view_point"):
        check_action(_fd(view_point="wrist_view"))
    with pytest.raises(ValidationError, match="embodiment"):
        check_action(GenerationRequest(mode="policy", prompt="p", image=START[0], embodiment="robotwin").resolve())
    with pytest.raises(ValidationError, match="asynchronous job"):
        refuse_sync_action(_fd())


def test_the_stand_in_server_serves_every_action_mode(tmp_path, diffusers_backend):
    from cosmos_helpers.backends.vllm_omni import VllmOmniBackend
    from cosmos_helpers.standins.vllm_omni.local import ThreadedServer

    with ThreadedServer(diffusers_backend, storage_dir=tmp_path, guardrails=False) as server, \
            VllmOmniBackend(server.url, progress=False, poll_interval=0.05, timeout=120) as client:
        for request in _action_requests():
            generation = client.generate(request)
            assert generation.frames.shape == (9, 48, 64, 3), request.mode
            if request.mode == "forward_dynamics":
                assert generation.actions is None
            else:
                assert generation.actions.shape == (8, 9) and np.isfinite(generation.actions).all()


def test_action_requests_become_valid_framework_samples(tmp_path):
    import jsonschema

    from cosmos_helpers.backends.framework import request_payload

    schema = fw.sample_overrides_schema()
    for request in _action_requests():
        request = request.replace(profile="nano", model=None, fps=10, num_frames=9).resolve()
        payload = request_payload(request, name=request.mode, image_dir=tmp_path)
        jsonschema.validate(payload, schema)
        assert payload["model_mode"] == proto.FRAMEWORK_MODES[request.mode] and payload["domain_name"] == "av"
        assert (payload["action_chunk_size"], payload["image_size"]) == (8, 256)
        assert Path(payload["vision_path"]).is_file()
        if request.mode == "forward_dynamics":
            assert np.array_equal(load_trajectory(payload["action_path"]), request.actions)
        else:
            assert "action_path" not in payload
        guided = request_payload(request.replace(guidance_interval=(400, 1000)), name=request.mode, image_dir=tmp_path)
        jsonschema.validate(guided, schema)  # the framework reads it for action samples too (inference.py:1709)
        assert guided["guidance_interval"] == list(fw.to_strict((400, 1000)))
        with pytest.raises(ValidationError, match="no negative caption") as refused:  # the framework ignores it
            request_payload(request.replace(negative_prompt="blurry"), name=request.mode, image_dir=tmp_path)
        assert refused.value.field == "negative_prompt"


def test_the_form_runs_action_modes_and_the_gallery_draws_trajectories(tmp_path, diffusers_backend):
    from cosmos_helpers import media
    from cosmos_helpers.gallery import write_gallery
    from cosmos_helpers.widgets import GenerateForm

    media.write_png(tmp_path / "start.png", START[0])
    save_trajectory(tmp_path / "drive.json", sample_trajectory("av", 8))
    form = GenerateForm(diffusers_backend, output_dir=tmp_path / "out",
                        defaults={"mode": "forward_dynamics", "image": str(tmp_path / "start.png"),
                                  "actions": str(tmp_path / "drive.json"), "embodiment": "av", "num_frames": 9,
                                  "num_inference_steps": 2, "prompt": "drive ahead"})
    assert form.embodiment.layout.display is None and form.aspect_ratio.disabled and form.tier.value == "256"
    form.button.click()
    assert form.last_error is None, form.status.value
    assert form.last.frames.shape == (9, 48, 64, 3)
    form.mode.value = "policy"
    assert form.actions.layout.display == "none"
    form.button.click()
    assert form.last_error is None and form.last.actions.shape == (8, 9)
    form.mode.value = "inverse_dynamics"
    assert form.generate() is None and "video" in form.status.value  # the image path is not a video
    page = write_gallery(tmp_path / "out")
    drawn = sorted((tmp_path / "out").glob("*.trajectory.png"))
    assert len(drawn) == 2 and all(path.name in page.read_text() for path in drawn)


def test_framework_action_samples_are_checked_per_backend(tmp_path):
    from cosmos_helpers.specs import Sample, given_fields
    from tests.sample_checks import check_backend

    def check(backend, **changes):
        data = {"model_mode": "wam", "prompt": "p", "vision_path": "https://example.com/a.mp4",
                "domain_name": "bridge_orig_lerobot", **changes}
        sample = Sample.from_dict(data, name="s")
        check_backend(sample, sample.resolved(profile="tiny"), backend, given_fields(sample))

    check("diffusers")
    check("vllm-omni")
    for backend, changes, field in [("vllm-omni", {"view_point": "ego_view"}, "view_point"),
                                    ("diffusers", {"domain_name": "robotwin"}, "domain_name"),
                                    ("vllm-omni", {"domain_name": "robotwin"}, "domain_name"),
                                    ("diffusers", {"raw_action_dim": 7}, "raw_action_dim"),
                                    ("diffusers", {"normalize_cfg": True}, "normalize_cfg")]:
        with pytest.raises(ValidationError) as caught:
            check(backend, **changes)
        assert caught.value.field == field
    check("framework", domain_name="robotwin")  # the framework knows it
    # the framework reads an action sample's guidance interval as any sample's (inference.py:1709): it is sent
    import dataclasses

    from cosmos_helpers import media
    from cosmos_helpers.specs import generation_request

    sample = Sample.from_dict({"model_mode": "wam", "prompt": "p", "vision_path": "https://example.com/a.mp4",
                               "domain_name": "bridge_orig_lerobot", "guidance_interval": [400, 1000], "seed": 1},
                              name="s")
    resolved = sample.resolved(profile="tiny")
    check_backend(sample, resolved, "diffusers", given_fields(sample))
    media.write_mp4(tmp_path / "start.mp4", START, 10)
    resolved = dataclasses.replace(resolved, vision_path=str(tmp_path / "start.mp4"))
    assert generation_request(resolved, given_fields(sample)).guidance_interval == fw.to_inclusive((400, 1000))


def test_the_generate_command_runs_an_action_mode_and_saves_the_predicted_actions(tmp_path, capsys):
    from cosmos_helpers import media
    from cosmos_helpers.cli import main

    media.write_png(tmp_path / "start.png", START[0])
    code = main(["generate", "--mode", "policy", "--prompt", "drive ahead", "--image", str(tmp_path / "start.png"),
                 "--embodiment", "av", "--frames", "9", "--steps", "1", "--out", str(tmp_path / "out")])
    assert code == 0
    video = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert video == tmp_path / "out" / "policy.mp4"
    saved = load_trajectory(video.with_suffix(".actions.json"))
    assert saved.shape == (8, 9)
    assert np.array_equal(saved, np.asarray(json.loads(video.with_suffix(".json").read_text())["actions"],
                                            dtype=np.float32))
    again = ["generate", "--mode", "policy", "--prompt", "drive ahead", "--image", str(tmp_path / "start.png"),
             "--embodiment", "av", "--frames", "9", "--steps", "1", "--out", str(tmp_path / "out")]
    assert main(again) == 0  # a rerun finds its video and its trajectory done
    assert np.array_equal(load_trajectory(video.with_suffix(".actions.json")), saved)
    video.with_suffix(".actions.json").write_text(json.dumps(np.zeros((8, 9)).tolist()))  # a stale trajectory
    assert main(again) == 0  # the video's manifest records its trajectory: the file is written again from it
    assert np.array_equal(load_trajectory(video.with_suffix(".actions.json")), saved)
    assert main(["generate", "--mode", "fd", "--prompt", "p", "--image", str(tmp_path / "start.png"),
                 "--embodiment", "av", "--out", str(tmp_path / "out")]) != 0
    assert "actions" in capsys.readouterr().err
