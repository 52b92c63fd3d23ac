"""The fast path under diffusers' SeaCache, on the trained tiny model in fp32 on CPU: the same passes computed at the
same steps of each guidance branch as stock + SeaCache, and the same final latents."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from cosmos_helpers.fast import disable_fast_path, enable_fast_path, fast_path_stats  # noqa: E402

STEPS = 12
TOL = 1e-5
PROMPT = "a red ball rolls across a wooden floor"


@pytest.fixture(scope="module")
def pipe():
    from cosmos_helpers.backends.diffusers import pipeline_class
    from cosmos_helpers.models.tiny_trained import trained_tiny_path

    p = pipeline_class().from_pretrained(str(trained_tiny_path()), dtype=torch.float32, enable_safety_checker=False)
    p.set_progress_bar_config(disable=True)
    return p


def _image(h=96, w=160):
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([(xx * 255 // w), (yy * 255 // h), ((xx + yy) * 127 // (h + w))], -1).astype(np.uint8)


CASES = {
    "t2v": dict(num_frames=9),
    "i2v": dict(num_frames=9, image=_image()),
    "t2v_sound": dict(num_frames=9, enable_sound=True),
    "t2i": dict(num_frames=1),
}


def _run(pipe, case, config, *, guidance_interval=None):
    """Final latents of one call under ``config``, and the (branch, step) of every pass that ran the stack."""
    pipe.transformer.enable_cache(config)
    root = pipe.transformer._diffusers_hook.get_hook("sea_cache_root")
    computed = []
    record = root.record_decoder_stack

    def spy(module, und, gen):
        context = root.state_manager._context
        computed.append((context.name, context.step_index))
        return record(module, und, gen)

    root.record_decoder_stack = spy
    pipe.guidance_interval = guidance_interval
    try:
        out = pipe(prompt=PROMPT, negative_prompt="blurry", num_inference_steps=STEPS, guidance_scale=6.0, fps=24,
                   height=96, width=160, generator=torch.Generator("cpu").manual_seed(0), output_type="latent",
                   add_resolution_template=False, add_duration_template=False, **CASES[case])
    finally:
        pipe.guidance_interval = None
        pipe.transformer.disable_cache()
    return out.video.detach().clone(), computed


def _max_rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


VARIANTS = {
    "sequential_cfg": dict(batch_cfg=False),
    "batched_cfg": dict(batch_cfg=True),
    "all_cpu_switches": dict(batch_cfg=True, fuse_projections=True, compile="eager"),
}


def _config(**kw):
    from diffusers import SeaCacheConfig

    return SeaCacheConfig(**kw)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("case", list(CASES))
def test_fast_with_seacache_matches_stock_with_seacache(pipe, case, variant):
    stock, stock_passes = _run(pipe, case, _config())
    enable_fast_path(pipe, **VARIANTS[variant])
    try:
        fast, fast_passes = _run(pipe, case, _config())
        stats = fast_path_stats(pipe)
    finally:
        disable_fast_path(pipe)
    assert fast_passes == stock_passes  # the same branches computed at the same steps
    assert 2 * 2 <= len(stock_passes) < 2 * STEPS  # first and last steps full, some skipped between
    assert _max_rel(fast, stock) <= TOL
    assert stats["stock_fallbacks"] == 0 and stats["computed_passes"] == len(stock_passes)
    assert stats["cached_passes"] == 2 * STEPS - len(stock_passes)
    if variant != "sequential_cfg":  # steps where both branches computed ran as one batch
        both = {step for name, step in stock_passes if name == "cond"} & {s for n, s in stock_passes if n == "uncond"}
        assert stats["batched_pairs"] == len(both - {0})  # step 0 has no known partner yet


def test_bit_identical_without_batching(pipe):
    stock, _ = _run(pipe, "t2v_sound", _config(threshold=0.5, max_consecutive_cached=0))
    enable_fast_path(pipe, batch_cfg=False)
    try:
        fast, _ = _run(pipe, "t2v_sound", _config(threshold=0.5, max_consecutive_cached=0))
    finally:
        disable_fast_path(pipe)
    assert torch.equal(fast, stock)


def test_branches_that_decide_differently_each_run_what_they_need(pipe):
    """With a guidance interval the negative branch skips some steps entirely, so its cache state restarts and its
    decisions part from the conditional branch's: the fast path still computes exactly what stock computes."""
    interval = (300.0, 800.0)
    stock, stock_passes = _run(pipe, "t2v", _config(), guidance_interval=interval)
    enable_fast_path(pipe, batch_cfg=True)
    try:
        fast, fast_passes = _run(pipe, "t2v", _config(), guidance_interval=interval)
    finally:
        disable_fast_path(pipe)
    cond = [s for n, s in stock_passes if n == "cond"]
    uncond = [s for n, s in stock_passes if n == "uncond"]
    assert set(uncond) - set(cond) or set(cond) - set(uncond)  # they did decide differently somewhere
    assert fast_passes == stock_passes and _max_rel(fast, stock) <= TOL


def test_a_wrong_batching_guess_costs_time_not_results(pipe, monkeypatch):
    """Forced to guess "the negative branch computes" at every step, the fast path batches, then follows the negative
    branch's real decision at its own call: the same passes and latents as stock."""
    from cosmos_helpers.fast.sea_cache import SeaCacheGate

    stock, stock_passes = _run(pipe, "t2v", _config())
    monkeypatch.setattr(SeaCacheGate, "predict", lambda self, context: True)
    enable_fast_path(pipe, batch_cfg=True)
    try:
        fast, fast_passes = _run(pipe, "t2v", _config())
        stats = fast_path_stats(pipe)
    finally:
        disable_fast_path(pipe)
    assert fast_passes == stock_passes and _max_rel(fast, stock) <= TOL
    assert stats["batched_pairs"] >= STEPS - 2  # batched at every step but the first (and the last's partner)


def test_other_hooks_fall_back_loudly(pipe):
    """A diffusers hook the fast path cannot compose with (here a plain one on a layer) sends the pass to stock code
    with a warning, counted by reason in the stats the manifest shows: never silently."""
    from diffusers.hooks import HookRegistry, ModelHook

    enable_fast_path(pipe)
    registry = HookRegistry.check_if_exists_or_initialize(pipe.transformer.layers[0])
    registry.register_hook(ModelHook(), "probe")
    try:
        with pytest.warns(UserWarning, match="fast path: diffusers hooks probe"):
            pipe(prompt=PROMPT, num_inference_steps=2, num_frames=9, height=96, width=160, output_type="latent",
                 generator=torch.Generator("cpu").manual_seed(0))
        stats = fast_path_stats(pipe)
    finally:
        registry.remove_hook("probe")
        disable_fast_path(pipe)
    assert stats["stock_fallbacks"] == 4 and stats["calls"] == 0
    assert stats["fallback_reasons"] == {"diffusers hooks probe": 4}
