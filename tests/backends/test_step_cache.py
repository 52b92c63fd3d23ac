"""Step caching on DiffusersBackend: a request's SeaCache is diffusers' own, for its call only, and recorded."""

import numpy as np
import pytest

from cosmos_helpers import GenerationRequest, SeaCache, ValidationError

STEPS = 12


def _request(**changes):
    return GenerationRequest(mode="t2v", prompt="a red ball rolls across a wooden floor", num_inference_steps=STEPS,
                             **changes)


@pytest.fixture(scope="module")
def uncached(tiny_backend):
    return tiny_backend.generate(_request())


@pytest.mark.parametrize(("ours", "theirs"), [(SeaCache(), {}),
                                              (SeaCache(threshold=0.5, max_consecutive=0),
                                               {"threshold": 0.5, "max_consecutive_cached": 0})])
def test_request_cache_is_diffusers_own_seacache(tiny_backend, uncached, ours, theirs):
    """The same frames as a user enabling diffusers' SeaCacheConfig on the pipeline by hand, and fewer passes."""
    from diffusers import SeaCacheConfig

    cached = tiny_backend.generate(_request(step_cache=ours))
    transformer = tiny_backend.pipeline("tiny").transformer
    assert transformer._cache_config is None  # removed after the call: the pipeline is shared
    transformer.enable_cache(SeaCacheConfig(**theirs))
    try:
        by_hand = tiny_backend.generate(_request())
    finally:
        transformer.disable_cache()
    assert np.array_equal(cached.frames, by_hand.frames)
    record = cached.provenance["step_cache"]
    assert record["method"] == "sea_cache" and record["passes"] == 2 * STEPS
    assert 0 < record["passes_computed"] < record["passes"]
    schedule = record["schedule"]  # first and last steps full, both branches
    assert schedule.count("C") == record["passes_computed"] and schedule[:2] == schedule[-2:] == "CC"
    assert by_hand.provenance["step_cache"]["source"] == "enabled on the pipeline by the caller"
    assert by_hand.provenance["step_cache"]["passes_computed"] == record["passes_computed"]
    assert not np.array_equal(cached.frames, uncached.frames)


def test_default_and_off_run_every_pass_and_say_so(tiny_backend, uncached):
    off = tiny_backend.generate(_request(step_cache="off"))
    assert np.array_equal(off.frames, uncached.frames)
    assert uncached.provenance["step_cache"] == {"choice": "default", "source": "diffusers default: off",
                                                 "method": "off", "passes": 2 * STEPS,
                                                 "passes_computed": 2 * STEPS, "schedule": "C" * 2 * STEPS}
    assert off.provenance["step_cache"]["choice"] == "off"


def test_a_cached_result_never_serves_an_uncached_request():
    fingerprints = {_request(step_cache=value).fingerprint() for value in (None, "off", "sea", SeaCache(threshold=.3))}
    assert len(fingerprints) == 4
    assert _request(step_cache="sea").fingerprint() == _request(step_cache=SeaCache()).fingerprint()


def test_what_diffusers_cannot_run_is_refused_before_loading(tiny_backend):
    with pytest.raises(ValidationError, match="step_cache.residual_order: the diffusers backend"):
        tiny_backend.generate(_request(step_cache=SeaCache(residual_order=2)))
    with pytest.raises(ValidationError, match="step_cache"):
        _request(step_cache="sometimes")
    transformer = tiny_backend.pipeline("tiny").transformer
    from diffusers import SeaCacheConfig

    transformer.enable_cache(SeaCacheConfig())
    try:
        with pytest.raises(ValidationError, match="already has a SeaCacheConfig enabled"):
            tiny_backend.generate(_request(step_cache="off"))
    finally:
        transformer.disable_cache()


def test_the_fast_backend_runs_the_same_cached_passes(tiny_backend):
    """DiffusersBackend(fast=True) with a step cache: the fast path computes (no silent fallback to stock), the same
    passes as the stock backend, the same frames (fp32 CPU)."""
    from cosmos_helpers import DiffusersBackend
    from cosmos_helpers.fast import FastOptions

    request = _request(step_cache=SeaCache())
    stock = tiny_backend.generate(request)
    fast = DiffusersBackend(progress=False, fast=FastOptions(batch_cfg=True)).generate(request)
    assert fast.provenance["step_cache"] == stock.provenance["step_cache"]
    assert "fast_fallbacks" not in fast.provenance
    assert np.abs(fast.frames.astype(int) - stock.frames.astype(int)).max() <= 1


def test_several_gpus_refuse_seacache_before_starting_workers():
    from cosmos_helpers import DiffusersBackend

    backend = DiffusersBackend(progress=False, device="cpu", gpus=2)
    with pytest.raises(ValidationError, match=r"step_cache: DiffusersBackend\(gpus=2\) does not run SeaCache"):
        backend.generate(_request(step_cache=SeaCache()))
    assert backend._workers is None


def test_distilled_and_edit_loops_run_the_cache_too(tiny_backend, rgb_image):
    """The distilled blocks and the edit loop enter a cache context per pass, so SeaCache applies there as well."""
    distilled = GenerationRequest(mode="t2i", prompt="a red ball", profile="tiny-distilled", step_cache="sea")
    record = tiny_backend.generate(distilled).provenance["step_cache"]
    assert record["method"] == "sea_cache" and record["passes"] == 4
    edit = GenerationRequest(mode="i2i", prompt="make the ball blue", image=rgb_image, num_inference_steps=STEPS,
                             step_cache=SeaCache(threshold=1.0, max_consecutive=0))
    record = tiny_backend.generate(edit).provenance["step_cache"]
    assert record["passes"] == 2 * STEPS and record["passes_computed"] < record["passes"]
