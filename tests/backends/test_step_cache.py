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
    assert by_hand.provenance["step_cache"]["source"] == "enabled on the pipeline by the caller"
    assert by_hand.provenance["step_cache"]["passes_computed"] == record["passes_computed"]
    assert not np.array_equal(cached.frames, uncached.frames)


def test_default_and_off_run_every_pass_and_say_so(tiny_backend, uncached):
    off = tiny_backend.generate(_request(step_cache="off"))
    assert np.array_equal(off.frames, uncached.frames)
    assert uncached.provenance["step_cache"] == {"choice": "default", "source": "diffusers default: off",
                                                 "method": "off", "passes": 2 * STEPS,
                                                 "passes_computed": 2 * STEPS}
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
