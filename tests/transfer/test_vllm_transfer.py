"""Transfer over the vLLM-Omni 0.30.0 protocol: the form keeps the framework's meaning (no re-timing fps, the
length as a cap, tiers and inputs the real server knows, inclusive intervals), and the server hook rebuilds a
request with vLLM-Omni's own rules (nearest bucket, its fps order, num_frames as a cap)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cosmos_helpers import DiffusersBackend, media
from cosmos_helpers.errors import ValidationError
from cosmos_helpers.protocol import framework as fw
from cosmos_helpers.protocol import vllm_omni as vo
from cosmos_helpers.samples import rolling_ball_clip
from cosmos_helpers.specs import Sample, given_fields
from cosmos_helpers.backends.vllm_transfer import transfer_form
from cosmos_helpers.standins.vllm_omni.transfer import make_transfer_runner, vllm_transfer


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vllm_media")
    media.write_mp4(folder / "rgb9.mp4", rolling_ball_clip(9, 160, 90), 24)
    media.write_mp4(folder / "ctrl10fps.mp4", rolling_ball_clip(9, 64, 48), 10)
    media.write_png(folder / "still.png", rolling_ball_clip(1, 160, 90)[0])
    return folder


def form(folder, overrides=None, profile="tiny", **fields):
    data = {"name": "t", "prompt": "a red ball", "seed": 3, "num_video_frames_per_chunk": 9, **fields}
    sample = Sample.from_dict(data, base_dir=folder)
    overrides = {"resolution": "256", **(overrides or {})}
    r = sample.resolved(profile=profile, overrides=overrides)
    return r, given_fields(sample, overrides)


def test_the_form_keeps_the_frameworks_meaning(media_dir):
    r, given = form(media_dir, vision_path="rgb9.mp4", edge={}, fps=30)
    fields, files = transfer_form(r, given)
    extra = json.loads(fields["extra_params"])
    assert "fps" not in fields  # a request fps would re-time the MP4 the server encodes
    assert extra["fps"] == 24.0  # the framework's output fps: the input video's, not the sample's 30
    assert fields["num_frames"] == "9" and fields["seed"] == "3" and fields["num_inference_steps"] == "4"
    assert extra["edge"] is True and extra["resolution"] == "256" and set(files) == {"input_reference"}
    assert (extra["guidance"], extra["control_guidance"], extra["shift"]) == (3.0, 1.5, 10.0)  # edge tuned
    assert "negative_prompt" not in fields  # the server's default, as the framework keeps its own
    assert set(fields) <= set(vo.VIDEO_FIELDS) and set(files) <= set(vo.VIDEO_FILES)
    assert extra["guardrails"] is False  # the run's choice (tiny: off), not the server's default (on)
    guarded, given = form(media_dir, profile="nano", vision_path="rgb9.mp4", edge={})
    assert json.loads(transfer_form(guarded, given)[0]["extra_params"])["guardrails"] is True


def test_an_aspect_ratio_the_server_would_pick_anyway_is_accepted(media_dir):
    r, given = form(media_dir, vision_path="rgb9.mp4", edge={}, aspect_ratio="16,9")  # 160x90: 16,9
    transfer_form(r, given)


def test_a_precomputed_control_is_uploaded_with_its_type(media_dir):
    r, given = form(media_dir, depth={"control_path": "ctrl10fps.mp4", "weight": 0.5}, fps=12)
    fields, files = transfer_form(r, given)
    extra = json.loads(fields["extra_params"])
    assert fields["control_type"] == "depth" and set(files) == {"control_reference"}
    assert extra["depth"] == {"control_weight": 0.5} and extra["fps"] == 12.0  # no RGB: the sample's fps


def test_the_cpu_tier_is_refused_before_sending(media_dir):
    sample = Sample.from_dict({"prompt": "p", "vision_path": "rgb9.mp4", "edge": {}, "seed": 1}, base_dir=media_dir)
    r = sample.resolved(profile="tiny")  # tier 128: this project's CPU tier
    with pytest.raises(ValidationError) as refused:
        transfer_form(r, given_fields(sample))
    assert refused.value.field == "resolution" and "vllm-omni" in str(refused.value)
    assert all(tier in refused.value.fix for tier in vo.TIERS)


@pytest.mark.parametrize(("fields", "field"), [
    (dict(vision_path="rgb9.mp4", edge={}, guidance_interval=[100, 900]), "guidance_interval"),
    (dict(vision_path="still.png", edge={}), "vision_path"),
    (dict(vision_path="rgb9.mp4", edge={"control_path": "ctrl10fps.mp4"}, depth={"control_path": "ctrl10fps.mp4"}),
     "depth.control_path"),
    (dict(vision_path="rgb9.mp4", edge={}, normalize_cfg=True), "normalize_cfg"),
    (dict(vision_path="rgb9.mp4", edge={}, aspect_ratio="1,1"), "aspect_ratio"),  # the server takes the input's
])
def test_what_vllm_omni_cannot_do_is_refused_before_sending(media_dir, fields, field):
    r, given = form(media_dir, **fields)
    with pytest.raises(ValidationError) as refused:
        transfer_form(r, given)
    assert refused.value.field == field and "vllm-omni" in str(refused.value) and refused.value.fix


def test_a_url_input_is_fetched_through_the_frameworks_cache_and_uploaded(media_dir, tmp_path, monkeypatch):
    from cosmos_helpers.specs.runs import localize

    url = "https://example.com/inputs/clip.mp4"
    monkeypatch.setenv(fw.DOWNLOAD_CACHE_ENV, str(tmp_path))
    cached = fw.download_cache_path(url, "vision.mp4", tmp_path)
    cached.write_bytes((media_dir / "rgb9.mp4").read_bytes())
    r, given = form(media_dir, vision_path=url, edge={})
    with pytest.raises(ValidationError, match="cannot download") as offline:  # no .done marker: not finished
        localize(r, progress=False)
    assert offline.value.field == "vision_path" and str(cached) in offline.value.fix
    assert fw.DOWNLOAD_CACHE_ENV in offline.value.fix
    (tmp_path / f"{cached.name}.done").write_text(url)
    _, files = transfer_form(localize(r, progress=False), given)
    assert files["input_reference"][1] == cached.read_bytes()


def test_intervals_travel_inclusive_with_the_same_timesteps(media_dir):
    r, given = form(media_dir, vision_path="rgb9.mp4", edge={}, control_guidance_interval=[100, 900.5])
    fields, _ = transfer_form(r, given)
    lo, hi = json.loads(fields["extra_params"])["control_guidance_interval"]  # vLLM-Omni: active iff lo <= t <= hi
    timesteps = [100.0, 100.25, 500.0, 900.4999, 900.5, 900.75] + [float(t) for t in range(1001)]
    assert [t for t in timesteps if lo <= t <= hi] == [t for t in timesteps if 100 < t < 900.5]  # the framework's
    rebuilt, _, _ = vllm_transfer(fields, json.loads(fields["extra_params"]), media_dir / "rgb9.mp4", {})
    lo, hi = rebuilt.control_guidance_interval  # strict again: the same timesteps inside
    assert (lo, hi) == (100.0, 900.5)


def test_the_server_rebuilds_a_request_with_vllm_omnis_rules(media_dir):
    rgb, control = media_dir / "rgb9.mp4", media_dir / "ctrl10fps.mp4"
    extra = {"edge": {"preset_edge_threshold": "low"}, "resolution": "256", "fps": 10}
    r, aspect, fps = vllm_transfer({"prompt": "p", "num_frames": "5", "seed": "1"}, extra, rgb, {})
    assert fps == 24.0  # the input video's fps beats extra_params.fps
    assert (aspect, r.bucket_size) == ("16,9", (320, 192)) and r.max_frames == 5  # num_frames caps the length
    assert (r.guidance, r.control_guidance, r.hints[0].preset) == (3.0, 1.5, "low") and r.guidance_interval is None
    wsm, _, fps = vllm_transfer({"prompt": "p", "num_frames": "9", "seed": "1"}, {"resolution": "256"}, None,
                                {"wsm": control})
    assert fps == 10.0 and (wsm.guidance, wsm.control_guidance) == (1.0, 3.0)  # one wsm hint: its tuned fps
    _, aspect, _ = vllm_transfer({"prompt": "p", "seed": "1"}, {"resolution": "256"}, None, {"depth": control})
    assert aspect == "4,3"  # the bucket nearest the control's shape
    with pytest.raises(ValidationError, match="Unknown Cosmos3"):
        vllm_transfer({"prompt": "p"}, {"edge": True, "resolution": "128"}, rgb, {})
    assert r.model == "tiny" and r.guardrails is False  # the default profile's model; the server's switch: off


def test_the_server_hook_runs_guardrails_when_the_server_does_and_the_request_allows(media_dir):
    rgb, edge = media_dir / "rgb9.mp4", {"edge": True, "resolution": "256"}
    on = {"prompt": "p", "seed": "1"}
    assert vllm_transfer(on, edge, rgb, {}, guardrails=True)[0].guardrails is True  # vLLM-Omni's default: on
    assert vllm_transfer(on, {**edge, "guardrails": False}, rgb, {}, guardrails=True)[0].guardrails is False
    assert vllm_transfer(on, {**edge, "guardrails": True}, rgb, {}, guardrails=False)[0].guardrails is False


@pytest.mark.slow
def test_the_same_sample_through_the_form_and_the_hook_equals_the_diffusers_transfer(media_dir):
    from cosmos_helpers.backends.diffusers.transfer import run_transfer

    r, given = form(media_dir, vision_path="rgb9.mp4", edge={"preset_edge_threshold": "low"},
                    overrides={"num_steps": 1})
    fields, _ = transfer_form(r, given)
    served = make_transfer_runner("tiny")(fields, json.loads(fields["extra_params"]), media_dir / "rgb9.mp4", {})
    local = run_transfer(r, backend=DiffusersBackend(progress=False), progress=False)
    assert served.frames.shape == local.frames.shape == (9, 192, 320, 3)
    assert np.array_equal(served.frames, local.frames)
    assert served.provenance["prompt"] == local.provenance["prompt"]
