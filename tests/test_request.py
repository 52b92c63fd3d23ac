"""GenerationRequest validates everything at construction, naming the field and the fix; it keeps what was given,
and ``resolve()`` gives the values to run."""

import json
from pathlib import Path

import numpy as np
import pytest

from cosmos_helpers import GenerationRequest, ValidationError

OK = {"prompt": "a robot"}


def bad_inputs(tmp: Path):
    broken_json = tmp / "broken.json"
    broken_json.write_text("{not json")
    not_an_image = tmp / "photo.png"
    not_an_image.write_text("plain text, not pixels")
    not_a_video = tmp / "clip.mp4"
    not_a_video.write_bytes(b"\x00" * 64)
    img = np.zeros((32, 32, 3), np.uint8)
    vid = np.zeros((9, 32, 32, 3), np.uint8)
    # (kwargs, field named, fragment of the message)
    return [
        (dict(mode="text2sound"), "mode", "unknown mode"),
        (dict(prompt=""), "prompt", "empty"),
        (dict(prompt="   "), "prompt", "empty"),
        (dict(prompt=tmp / "missing.json"), "prompt", "does not exist"),
        (dict(prompt=broken_json), "prompt", "not valid JSON"),
        (dict(negative_prompt=tmp / "nope.json"), "negative_prompt", "does not exist"),
        (dict(profile="mega"), "profile", "unknown profile"),
        (dict(tier="1000"), "tier", "unknown resolution tier"),
        (dict(aspect_ratio="21:9"), "aspect_ratio", "unknown aspect ratio"),
        (dict(width=1000, height=720), "width", "use 992 or 1008"),
        (dict(width=1280, height=700), "height", "use 688 or 704"),
        (dict(width=1280), "height", "given together"),
        (dict(width=1280, height=720, tier="720"), "tier", "not both"),
        (dict(mode="text2video", num_frames=100), "num_frames", "would silently make it 97"),
        (dict(mode="text2video", num_frames=2), "num_frames", "not a video"),
        (dict(mode="text2video", num_frames=9.5), "num_frames", "integer"),
        (dict(mode="text2image", num_frames=17), "num_frames", "one frame"),
        (dict(mode="text2video", fps=0), "fps", "out of range"),
        (dict(num_inference_steps=0), "num_inference_steps", "1 to 200"),
        (dict(num_inference_steps=500), "num_inference_steps", "1 to 200"),
        (dict(guidance_scale=-1.0), "guidance_scale", "outside"),
        (dict(guidance_scale=float("nan")), "guidance_scale", "outside"),
        (dict(flow_shift=0.0), "flow_shift", "above 0"),
        (dict(seed=-3), "seed", "integer from 0"),
        (dict(mode="text2image", sound=True), "sound", "cannot carry sound"),
        (dict(mode="text2image", image=img), "image", "no conditioning image"),
        (dict(mode="text2video", image=img), "image", "no conditioning image"),
        (dict(mode="image2video"), "image", "needs a conditioning image"),
        (dict(mode="image2video", image=tmp / "absent.png"), "image", "does not exist"),
        (dict(mode="image2video", image=not_an_image), "image", "not a readable image"),
        (dict(mode="image2video", image=np.zeros((4, 4, 7), np.uint8)), "image", "HxWx3"),
        (dict(mode="image2video", video=vid), "video", "no conditioning video"),
        (dict(mode="video2video"), "video", "needs a conditioning video"),
        (dict(mode="video2video", video=not_a_video), "video", "not a readable video"),
        (dict(mode="video2video", video=tmp / "absent.mp4"), "video", "does not exist"),
        (dict(mode="video2video", video=vid, image=img), "image", "no conditioning image"),
        (dict(mode="video2video", video=vid, num_frames=9, condition_frames=(0, 5)), "condition_frames", "past the"),
        (dict(mode="video2video", video=vid, condition_video_keep="middle"), "condition_video_keep", "'first'"),
        (dict(mode="image2video", image=img, condition_frames=(0, 1)), "condition_frames", "only video2video"),
        (dict(mode="text2video", condition_video_keep="last"), "condition_video_keep", "only video2video"),
        (dict(width=1280, height=720, aspect_ratio="1:1"), "aspect_ratio", "contradicts"),
        (dict(sound="yes"), "sound", "True or False"),
        (dict(guardrails="off"), "guardrails", "True or False"),
        (dict(use_system_prompt="yes"), "use_system_prompt", "True or False"),
        (dict(prompt={"subject": "a ball"}, add_duration_template=True), "add_duration_template", "plain-text"),
        (dict(guidance_interval=(600, 400)), "guidance_interval", "lo <= hi"),
        (dict(guidance_interval=(0, 1200)), "guidance_interval", "lo <= hi"),
        (dict(guidance_interval=400), "guidance_interval", "(lo, hi)"),
        (dict(model=""), "model", "model name"),
        (dict(prompt=3), "prompt", "pathlib.Path"),
    ]


def test_bad_inputs_fail_at_construction_with_field_and_fix(tmp_path):
    cases = bad_inputs(tmp_path)
    assert len(cases) >= 15
    for kwargs, field, fragment in cases:
        with pytest.raises(ValidationError) as caught:
            GenerationRequest(**{"mode": "text2video", **OK, **kwargs})
        error = caught.value
        assert error.field == field, (kwargs, str(error))
        assert fragment in str(error), (kwargs, str(error))
        assert "Fix:" in str(error), (kwargs, str(error))
        assert str(error).startswith(f"{field}:")


def test_profile_defaults_fill_every_setting_per_mode():
    request = GenerationRequest(mode="t2v", prompt="a robot").resolve()
    assert request.mode == "text2video"
    assert (request.width, request.height) == (160, 96)
    assert request.num_frames == 9 and request.fps == 24.0
    assert request.model == "tiny" and request.guardrails is False
    nano = GenerationRequest(mode="t2v", prompt="a robot", profile="nano").resolve()
    assert (nano.width, nano.height, nano.num_frames, nano.num_inference_steps) == (1280, 720, 189, 35)
    assert (nano.guidance_scale, nano.flow_shift, nano.model) == (6.0, 10.0, "nvidia/Cosmos3-Nano")
    assert nano.guardrails is True
    image = GenerationRequest(mode="t2i", prompt="a robot", profile="nano").resolve()
    assert (image.width, image.height, image.num_inference_steps) == (960, 960, 50)
    assert (image.guidance_scale, image.flow_shift, image.aspect_ratio) == (4.0, 3.0, "1,1")
    tiny_image = GenerationRequest(mode="t2i", prompt="a robot").resolve()
    assert (tiny_image.width, tiny_image.height) == (128, 128)
    assert (tiny_image.guidance_scale, tiny_image.flow_shift) == (4.0, 3.0)


def test_explicit_values_win_over_the_profile():
    request = GenerationRequest(mode="t2i", prompt="x", profile="nano", guidance_scale=6.0, flow_shift=10.0,
                                num_inference_steps=35, tier="480", aspect_ratio="16,9").resolve()
    assert (request.guidance_scale, request.flow_shift, request.num_inference_steps) == (6.0, 10.0, 35)
    assert (request.width, request.height) == (832, 480)
    assert request.explicit("guidance_scale") and not request.explicit("fps")


def test_the_model_comes_from_the_request_and_is_part_of_what_is_compared():
    tiny = GenerationRequest(mode="t2v", prompt="a robot", width=1280, height=720)
    nano = GenerationRequest(mode="t2v", prompt="a robot", width=1280, height=720, profile="nano", num_frames=9,
                             num_inference_steps=4)
    assert tiny.model is None and tiny.resolve().model == "tiny" and nano.resolve().model == "nvidia/Cosmos3-Nano"
    assert tiny.fingerprint() != nano.fingerprint()
    assert tiny.to_dict()["model"] == "tiny"
    assert GenerationRequest(mode="t2v", prompt="a", model="/data/ckpt").resolve().model == "/data/ckpt"


def test_backend_options_default_to_none_and_are_recorded():
    request = GenerationRequest(mode="t2v", prompt="a robot").resolve()
    for name in ("negative_prompt", "use_system_prompt", "add_resolution_template", "add_duration_template",
                 "guidance_interval"):
        assert getattr(request, name) is None and request.to_dict()[name] is None
    assert request.negative_prompt_text() is None
    explicit = request.replace(use_system_prompt=False, guidance_interval=[400, 1000], negative_prompt="")
    assert explicit.use_system_prompt is False and explicit.guidance_interval == (400.0, 1000.0)
    assert explicit.negative_prompt_text() == ""
    assert explicit.fingerprint() != request.fingerprint()


def test_a_string_prompt_is_text_even_when_it_ends_in_json(tmp_path, monkeypatch):
    (tmp_path / "robot.json").write_text('{"subject": "from the file"}')
    monkeypatch.chdir(tmp_path)
    text = GenerationRequest(mode="t2v", prompt="robot.json").resolve()
    assert text.prompt_text() == "robot.json" and not text.is_structured
    from_file = GenerationRequest(mode="t2v", prompt=Path("robot.json")).resolve()
    assert json.loads(from_file.prompt_text())["subject"] == "from the file" and from_file.is_structured
    negative = GenerationRequest(mode="t2v", prompt="x", negative_prompt="notes.txt").resolve()
    assert negative.negative_prompt_text() == "notes.txt"


def test_tier_aspect_and_explicit_sizes():
    bucket = GenerationRequest(mode="t2i", prompt="x", profile="nano", tier="480", aspect_ratio="9:16")
    assert (bucket.tier, bucket.aspect_ratio, bucket.width) == ("480", "9:16", None)  # as given
    assert (bucket.resolve().aspect_ratio, bucket.resolve().width) == ("9,16", 480)
    explicit = GenerationRequest(mode="t2i", prompt="x", width=320, height=192).resolve()
    assert (explicit.width, explicit.height, explicit.aspect_ratio, explicit.tier) == (320, 192, "16,9", None)


def test_structured_captions_get_real_metadata_and_plain_text_passes_through(assets):
    request = GenerationRequest(mode="t2v", prompt=assets / "prompts/text2video/warehouse_robot.json",
                                negative_prompt=assets / "negative_prompt.json", num_frames=17, fps=16).resolve()
    sent = json.loads(request.prompt_text())
    assert sent["resolution"] == {"H": 96, "W": 160} and sent["aspect_ratio"] == "16,9"
    assert sent["duration"] == "1s" and sent["fps"] == 16.0
    assert ", " in request.prompt_text()  # default json.dumps separators, as the framework re-serialises
    assert request.is_structured
    assert request.negative_prompt_text() == json.dumps(json.loads((assets / "negative_prompt.json").read_text()),
                                                        separators=(",", ":"))
    plain = GenerationRequest(mode="t2v", prompt="A red ball rolls.").resolve()
    assert plain.prompt_text() == "A red ball rolls." and not plain.is_structured


def test_image_captions_drop_video_metadata():
    request = GenerationRequest(mode="t2i", prompt={"subjects": [], "duration": "7s", "fps": 24}).resolve()
    sent = json.loads(request.prompt_text())
    assert "duration" not in sent and "fps" not in sent and sent["resolution"] == {"H": 128, "W": 128}


def test_replace_revalidates_and_fingerprint_tracks_what_changes_output(rgb_image):
    request = GenerationRequest(mode="i2v", prompt="a ball", image=rgb_image)
    assert request.replace(seed=1).seed == 1
    assert request.fingerprint() == GenerationRequest(mode="i2v", prompt="a ball", image=rgb_image.copy()).fingerprint()
    assert request.fingerprint() != request.replace(seed=1).fingerprint()
    assert request.fingerprint() != request.replace(image=rgb_image[::-1].copy()).fingerprint()
    with pytest.raises(ValidationError):
        request.replace(num_frames=10)


def test_media_inputs_accept_paths_pil_and_arrays(assets, rgb_image):
    from PIL import Image

    for image in (assets / "images/rolling_ball.png", Image.fromarray(rgb_image), rgb_image):
        request = GenerationRequest(mode="i2v", prompt="a ball", image=image).resolve()
        assert request.conditioning_image().mode == "RGB"
    video = GenerationRequest(mode="v2v", prompt="a ball", video=assets / "videos/rolling_ball.mp4").resolve()
    frames = video.conditioning_video()
    assert frames.dtype == np.uint8 and frames.shape[1:] == (180, 320, 3)


def test_the_request_keeps_what_was_given_and_resolve_fills_in_the_rest():
    given = dict(mode="t2v", prompt="a robot", tier=None, aspect_ratio="16:9", guidance_interval=[400, 1000],
                 condition_frames=None, step_cache="sea", num_frames=None)
    request = GenerationRequest(**given)
    for name, value in given.items():
        assert getattr(request, name) == value and type(getattr(request, name)) is type(value), name
    assert request.profile == "tiny" and request.model is None and request.fps is None
    resolved = request.resolve()
    assert (resolved.mode, resolved.tier, resolved.aspect_ratio) == ("text2video", "128", "16,9")
    assert resolved.num_frames == 9
    assert resolved.guidance_interval == (400.0, 1000.0) and resolved.request is request
    assert resolved.explicit("aspect_ratio") and not resolved.explicit("tier") and "fps" not in resolved.given
    assert resolved.resolve() is resolved and request.resolve() is resolved  # resolved once, at construction
    assert request.to_dict() == resolved.to_dict() and request.summary() == resolved.summary()


def test_resolving_again_gives_the_same_record_and_replace_resolves_the_change(rgb_image):
    request = GenerationRequest(mode="i2v", prompt="a ball", image=rgb_image, fps=16)
    again = GenerationRequest(mode="i2v", prompt="a ball", image=rgb_image, fps=16)
    assert request.resolve().fingerprint() == again.resolve().fingerprint() == request.fingerprint()
    changed = request.resolve().replace(seed=5)
    assert changed.seed == 5 and changed.request.seed == 5 and changed.request.fps == 16
    assert changed.fingerprint() == request.replace(seed=5).fingerprint() != request.fingerprint()
    with pytest.raises(ValidationError, match="num_frames"):
        request.resolve().replace(num_frames=10)


def test_building_a_request_keeps_no_decoded_media(assets, tmp_path):
    """Media given as files are checked while the request is built, but neither the request nor its resolved
    values hold their pixels: a request stays small enough to send to a worker or keep in a batch."""
    import pickle

    from cosmos_helpers.samples import render_drive, sample_trajectory
    from cosmos_helpers.media import write_mp4

    clip = assets / "videos/rolling_ball.mp4"
    drive = write_mp4(tmp_path / "drive.mp4", render_drive(sample_trajectory("av", 8), 64, 48), 10)
    requests = [GenerationRequest(mode="i2v", prompt="a ball", image=assets / "images/rolling_ball.png"),
                GenerationRequest(mode="i2i", prompt="make it blue", image=assets / "images/rolling_ball.png"),
                GenerationRequest(mode="v2v", prompt="a ball", video=clip),
                GenerationRequest(mode="id", prompt="drive", video=drive, embodiment="av")]
    for request in requests:
        assert len(pickle.dumps(request)) < 20_000, request.mode  # the resolved value travels with it
        for value in (*vars(request).values(), *vars(request.resolve()).values()):
            assert not isinstance(value, np.ndarray) and type(value).__module__.split(".")[0] != "PIL"
