"""The resolution table is the framework's VIDEO_RES_SIZE_INFO; profiles switch model and sizes together."""

import pytest

from cosmos_helpers.presets import (ASPECT_RATIOS, PROFILES, VIDEO_SIZES, floor_to_4k1, get_profile, nearest_aspect,
                                    normalize_aspect, normalize_tier, size_for)

# (tier, aspect) -> (width, height), copied from the framework's table, not from our code.
FRAMEWORK_TABLE = {
    ("256", "1,1"): (256, 256), ("256", "4,3"): (320, 256), ("256", "3,4"): (256, 320),
    ("256", "16,9"): (320, 192), ("256", "9,16"): (192, 320),
    ("480", "1,1"): (640, 640), ("480", "4,3"): (736, 544), ("480", "3,4"): (544, 736),
    ("480", "16,9"): (832, 480), ("480", "9,16"): (480, 832),
    ("720", "1,1"): (960, 960), ("720", "4,3"): (1104, 832), ("720", "3,4"): (832, 1104),
    ("720", "16,9"): (1280, 720), ("720", "9,16"): (720, 1280),
}


@pytest.mark.parametrize(("tier", "aspect"), sorted(FRAMEWORK_TABLE))
def test_every_tier_and_aspect_matches_the_framework_table(tier, aspect):
    assert size_for(tier, aspect) == FRAMEWORK_TABLE[(tier, aspect)]


def test_every_bucket_is_a_multiple_of_16():
    for tier, sizes in VIDEO_SIZES.items():
        assert set(sizes) == set(ASPECT_RATIOS), tier
        for width, height in sizes.values():
            assert width % 16 == 0 and height % 16 == 0


def test_spellings_of_tiers_and_aspects_are_normalised():
    assert normalize_aspect("16:9") == normalize_aspect("16x9") == normalize_aspect("16/9") == "16,9"
    assert normalize_tier("720p") == normalize_tier(720) == "720"
    assert size_for("480p", "9:16") == (480, 832)


def test_aspect_detection_picks_the_nearest_ratio():
    assert nearest_aspect(1920, 1080) == "16,9"
    assert nearest_aspect(1000, 990) == "1,1"
    assert nearest_aspect(3034, 1754) == "16,9"
    assert nearest_aspect(600, 800) == "3,4"


def test_frame_counts_floor_like_the_causal_vae():
    assert [floor_to_4k1(n) for n in (1, 2, 8, 10, 189, 190)] == [1, 1, 5, 9, 189, 189]


def test_real_profiles_carry_the_published_defaults():
    for name in ("nano", "super"):
        profile = get_profile(name)
        assert (profile.size(), profile.num_frames, profile.fps) == ((1280, 720), 189, 24.0)
        assert (profile.num_inference_steps, profile.guidance_scale, profile.flow_shift) == (35, 6.0, 10.0)
        assert profile.model == f"nvidia/Cosmos3-{name.capitalize()}"
    assert get_profile("tiny").model == "tiny" and not get_profile("tiny").guardrails
    assert set(PROFILES) == {"tiny", "nano", "super"}
