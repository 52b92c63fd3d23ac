"""Profiles carry the framework's published defaults per mode; buckets are the framework's plus our CPU tier."""

import pytest

from cosmos_helpers.presets import (ASPECT_RATIOS, CPU_TIER, MODES, PROFILES, VIDEO_SIZES, bucket_of, floor_to_4k1,
                                    get_profile, normalize_aspect, normalize_tier, size_for)
from cosmos_helpers.protocol import action
from cosmos_helpers.protocol.framework import detect_aspect_ratio

from .contracts.conftest import load

FRAMEWORK = load("cosmos_framework")


@pytest.mark.parametrize("tier", ["256", "480", "704", "720", "768"])
def test_every_framework_bucket_is_the_framework_size(tier):
    for aspect in ASPECT_RATIOS:
        assert list(size_for(tier, aspect)) == FRAMEWORK["video_res_size_info"][tier][aspect]


def test_every_bucket_is_a_multiple_of_16_and_the_cpu_tier_is_ours():
    for tier, sizes in VIDEO_SIZES.items():
        assert set(sizes) == set(ASPECT_RATIOS), tier
        for width, height in sizes.values():
            assert width % 16 == 0 and height % 16 == 0
    assert CPU_TIER not in FRAMEWORK["video_res_size_info"]
    assert size_for(CPU_TIER, "16,9") == (160, 96)


def test_spellings_sizes_and_buckets():
    assert normalize_aspect("16:9") == normalize_aspect("16x9") == normalize_aspect("16/9") == "16,9"
    assert normalize_tier("720p") == normalize_tier(720) == "720"
    assert size_for("480p", "9:16") == (480, 832)
    assert bucket_of(1280, 720) == ("720", "16,9") and bucket_of(1280, 704) == ("704", "16,9")
    assert bucket_of(1000, 720) is None


def test_aspect_detection_is_the_frameworks_rule():
    assert detect_aspect_ratio(1920, 1080) == "16,9"
    assert detect_aspect_ratio(1000, 990) == "1,1"
    assert detect_aspect_ratio(600, 800) == "3,4"


def test_frame_counts_floor_like_the_causal_vae():
    assert [floor_to_4k1(n) for n in (1, 2, 8, 10, 189, 190)] == [1, 1, 5, 9, 189, 189]


@pytest.mark.parametrize("name", ["nano", "super", "edge"])
def test_checkpoint_profiles_are_the_frameworks_per_mode_defaults(name):
    profile = get_profile(name)
    checkpoint = f"Cosmos3-{name.capitalize()}"
    assert profile.model == FRAMEWORK["checkpoints"][checkpoint]
    resolution = FRAMEWORK["model_configs"][checkpoint]["resolution"]
    for mode in MODES:
        real = FRAMEWORK["modality_defaults"][action.FRAMEWORK_MODES.get(mode, mode)]
        d = profile.defaults(mode)
        assert (d.num_inference_steps, d.guidance_scale, d.flow_shift) == (real["num_steps"], real["guidance"],
                                                                          real["shift"]), mode
        tier = str(real["image_size"]) if mode in action.MODES else resolution  # an action run's tier
        # image2image has no aspect in its defaults file (an edit keeps the input's shape): text2image's square
        aspect = real.get("aspect_ratio", FRAMEWORK["modality_defaults"]["text2image"]["aspect_ratio"])
        assert (d.tier, d.aspect_ratio, d.fps) == (tier, aspect, real["fps"]), mode
        if mode in action.MODES:
            assert d.num_frames == real["action_chunk_size"] + 1
    frames = 121 if name == "edge" else FRAMEWORK["modality_defaults"]["text2video"]["num_frames"]
    assert profile.defaults("text2video").num_frames == frames and profile.defaults("text2image").num_frames == 1


def test_text_to_image_and_video_defaults_differ_as_upstream():
    nano = get_profile("nano")
    image, video = nano.defaults("text2image"), nano.defaults("text2video")
    assert (image.num_inference_steps, image.guidance_scale, image.flow_shift, image.aspect_ratio) == (50, 4.0, 3.0,
                                                                                                      "1,1")
    assert (video.num_inference_steps, video.guidance_scale, video.flow_shift, video.aspect_ratio) == (35, 6.0, 10.0,
                                                                                                      "16,9")


def test_tiny_shrinks_size_length_and_steps_only():
    tiny, nano = get_profile("tiny"), get_profile("nano")
    assert tiny.model == "tiny" and not tiny.guardrails and nano.guardrails
    for mode in MODES:
        small, real = tiny.defaults(mode), nano.defaults(mode)
        # the CPU tier; an action run's tier is the smallest action canvas (its size follows the start image)
        assert (small.tier, small.num_inference_steps) == (action.TIERS[0] if mode in action.MODES else CPU_TIER, 4)
        assert (small.guidance_scale, small.flow_shift, small.aspect_ratio, small.fps) == (
            real.guidance_scale, real.flow_shift, real.aspect_ratio, real.fps)
    assert tiny.defaults("text2video").num_frames == 9
    assert set(PROFILES) == {"tiny", "nano", "super", "edge", "tiny-distilled", "tiny-edge", "super-t2i-4step",
                             "super-i2v-4step"}
