"""The sharding code against one process: two CPU (gloo) processes must give one process's final latents.

One spawn of two processes runs, one after the other: Ulysses, CFG-parallel, CFG-parallel with a guidance interval
that leaves the first step unguided, the fast path under Ulysses, and ``Ulysses.fast_attention`` against whole
attention; both plans combined run over four processes. The tiny model in fp32, 3 steps, guidance 6 (so every step
after the first runs its two branches on different ranks). Tolerance: max absolute difference of the final latents
<= 1e-5 (fp32; measured 0 here: the same operations run, only in other places).
"""

from __future__ import annotations

import socket

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
mp = pytest.importorskip("torch.multiprocessing")

from cosmos_helpers.backends.diffusers.parallel.plan import ParallelPlan  # noqa: E402

TOL = 1e-5
INTERVAL = (0.0, 960.0)  # 3 steps at t = 999, 952, 833: step 1 unguided, steps 2 and 3 guided
CALL = dict(prompt="A robot arm stacks three red cubes on a wooden table.", negative_prompt="blurry, distorted",
            num_frames=9, height=64, width=96, num_inference_steps=3, guidance_scale=6.0, enable_safety_check=False,
            output_type="latent", return_dict=False)


def _pipe(interval=None):
    from cosmos_helpers.backends.diffusers.loading import as_guided
    from cosmos_helpers.models.tiny import build_tiny_pipeline

    torch.set_num_threads(1)
    pipe = as_guided(build_tiny_pipeline(0))
    pipe.set_progress_bar_config(disable=True)
    pipe.guidance_interval = interval
    return pipe


def _latents(pipe):
    with torch.inference_mode():
        return pipe(**CALL, generator=torch.Generator("cpu").manual_seed(0))[0]


def _rank(rank: int, plans: list[ParallelPlan], port: int, out: str, intervals: tuple = (), fasts: tuple = (),
          attention: bool = False) -> None:
    """Every plan in turn on this rank, each on its own pipeline (the first plan's world size); ``fasts[i]``: the
    fast path's options for plan ``i``; ``attention``: then the fast attention check on the same group."""
    from cosmos_helpers.backends.diffusers.parallel.worker import join_group

    spec = {"device": "cpu", "port": port, "collective_timeout": 120, "plan": plans[0].__dict__}
    _, groups = join_group(spec, rank, plans[0].gpus)
    _run_plans(rank, plans, groups, out, intervals, fasts)
    if attention:
        _attention_check(rank, out)
    # Leave as the real worker does. A process that exits still holding its gloo group can abort (SIGABRT) while
    # the interpreter tears down gloo's threads; the barrier keeps either rank from leaving while the other talks.
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


def _run_plans(rank: int, plans: list[ParallelPlan], groups: dict, out: str, intervals: tuple, fasts: tuple) -> None:
    from cosmos_helpers.fast import fast_path_stats, set_fast_path_active
    from cosmos_helpers.backends.diffusers.parallel.worker import install_plan

    for index, plan in enumerate(plans):
        plan_groups = groups if index == 0 else {"cfg": groups["ulysses"], "ulysses": groups["ulysses"]}
        pipe = _pipe(intervals[index] if index < len(intervals) else None)
        fast = fasts[index] if index < len(fasts) else None
        state = install_plan(pipe, plan, plan_groups, rank, fast)
        if fast:
            set_fast_path_active(pipe, True)
        latents = _latents(pipe)
        stats = fast_path_stats(pipe)
        torch.save({"latents": latents, "cfg": dict(state.stats) if state else None,
                    "ulysses_passes": pipe._cosmos_ulysses.passes if plan.ulysses > 1 else 0,
                    "fast": {k: stats.get(k) for k in ("calls", "stock_fallbacks", "text_tower_runs")}},
                   f"{out}/plan{index}-rank{rank}.pt")


def _attention_check(rank: int, out: str) -> None:
    """``Ulysses.fast_attention`` on this rank's rows against whole attention, over the default group: heads split
    evenly (Nano: 8 key/value heads over 2 ranks) and repeated to the query heads (the tiny model's single key/value
    head), with 9 tokens (padding on the last rank)."""
    from cosmos_helpers.fast.attention import sdpa
    from cosmos_helpers.backends.diffusers.parallel.ulysses import Ulysses

    results = {}
    for kv_heads in (2, 1):
        gen = torch.Generator().manual_seed(kv_heads)
        q = torch.randn(9, 4, 8, generator=gen)
        k, v = (torch.randn(9, kv_heads, 8, generator=gen) for _ in "kv")
        text_k, text_v = (torch.randn(3, kv_heads, 8, generator=gen) for _ in "kv")
        sp = Ulysses(None, 2, rank)
        mine = sp.fast_attention(*(sp.split_rows(t) for t in (q, k, v)), text_k, text_v, 9, sdpa)
        whole = sdpa(q, torch.cat([text_k, k]), torch.cat([text_v, v]))
        results[kv_heads] = (sp.join_rows(mine, 9) - whole).abs().max().item()
    torch.save(results, f"{out}/attention-rank{rank}.pt")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def reference():
    return _latents(_pipe())


def test_guidance_interval_reference_differs():
    """The interval case below only means something if the interval changes the result."""
    assert (_latents(_pipe(INTERVAL)) - _latents(_pipe())).abs().max() > 1e-3


def _check(plans: list[ParallelPlan], reference, out, stats: list[dict | None]) -> None:
    for index, plan in enumerate(plans):
        for rank in range(plan.gpus):
            result = torch.load(out / f"plan{index}-rank{rank}.pt")
            expected = reference[index] if isinstance(reference, list) else reference
            difference = (result["latents"] - expected).abs().max().item()
            assert difference <= TOL, f"{plan}, rank {rank}: max |latent difference| {difference}"
            assert result["cfg"] == stats[index]
            if plan.ulysses > 1:  # every pass went through the shard seam: 3 steps, both branches
                assert result["ulysses_passes"] == (4 if plan.cfg_parallel > 1 else 6)


# steps 2 and 3 ran their branches apart; step 1 ran both everywhere
PARALLEL = {"parallel_steps": 2, "serial_calls": 2, "kept_hits": 2, "kept_misses": 0}
# with the interval: step 1 one pass, step 2 both everywhere (its negative inputs are new), step 3 apart
PARALLEL_INTERVAL = {"parallel_steps": 1, "serial_calls": 3, "kept_hits": 1, "kept_misses": 0}


@pytest.mark.slow
def test_cfg_parallel_ulysses_and_the_fast_path_on_two_processes_equal_one(reference, tmp_path):
    """Ulysses, CFG-parallel (with and without an interval) and, last, the fast generation stack under Ulysses: each
    rank runs cached text keys/values, the fused layer code and stacked products on its half of the generation
    tokens, exchanging them for heads around attention, and no pass falls back to stock. Then
    ``Ulysses.fast_attention`` against whole attention (:func:`_attention_check`)."""
    from cosmos_helpers.fast import FastOptions

    fast = FastOptions(compile="eager", fuse_projections=True)
    plans = [ParallelPlan.build(2, ulysses=2), ParallelPlan.build(2, cfg_parallel=2),
             ParallelPlan.build(2, cfg_parallel=2), ParallelPlan.build(2, ulysses=2)]
    mp.spawn(_rank, args=(plans, _free_port(), str(tmp_path), (None, None, INTERVAL), (None, None, None, fast), True),
             nprocs=2, join=True)
    _check(plans[:3], [reference, reference, _latents(_pipe(INTERVAL))], tmp_path, [None, PARALLEL, PARALLEL_INTERVAL])
    for rank in range(2):
        result = torch.load(tmp_path / f"plan3-rank{rank}.pt")
        difference = (result["latents"] - reference).abs().max().item()
        assert difference <= TOL, f"fast path, rank {rank}: max |latent difference| {difference}"
        # 3 steps x 2 branches, every one on the fast path; the text tower once per prompt
        assert result["fast"] == {"calls": 6, "stock_fallbacks": 0, "text_tower_runs": 2}, (rank, result["fast"])
        assert result["ulysses_passes"] == 0, rank  # the stock shard seam never ran
        assert all(d <= 1e-6 for d in torch.load(tmp_path / f"attention-rank{rank}.pt").values())


@pytest.mark.slow
def test_cfg_parallel_times_ulysses_on_four_processes_equals_one(reference, tmp_path):
    plans = [ParallelPlan.build(4, cfg_parallel=2, ulysses=2)]
    mp.spawn(_rank, args=(plans, _free_port(), str(tmp_path)), nprocs=4, join=True)
    _check(plans, reference, tmp_path, [PARALLEL])
