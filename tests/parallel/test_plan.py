"""Plan logic and validation of multi-GPU and memory settings: pure, no process, no model run."""

from __future__ import annotations

import pytest

from cosmos_helpers import DiffusersBackend, GenerationRequest
from cosmos_helpers.backends.memory import MemorySettings, plan_memory, resolve_memory
from cosmos_helpers.backends.vllm_serve import serve_command
from cosmos_helpers.errors import ValidationError
from cosmos_helpers.backends.diffusers.parallel import ParallelPlan
from cosmos_helpers.fast import FastOptions

NANO_BYTES = 15_160_000_000 * 2  # bf16 weights of Nano's transformer
SUPER_BYTES = 64_000_000_000 * 2


@pytest.mark.parametrize(("given", "expected"), [
    (dict(), (1, 1, 1)),
    (dict(gpus=2), (2, 2, 1)),
    (dict(gpus=4), (4, 2, 2)),
    (dict(gpus=3), (3, 1, 3)),
    (dict(gpus=2, ulysses=2), (2, 1, 2)),
    (dict(gpus=8, ulysses=4), (8, 2, 4)),
    (dict(cfg_parallel=2, ulysses=2), (4, 2, 2)),
    (dict(gpus=2, cfg_parallel=2), (2, 2, 1)),
])
def test_plan_fills_unset_degrees(given, expected):
    gpus = given.pop("gpus", None)
    plan = ParallelPlan.build(gpus, **given)
    assert (plan.gpus, plan.cfg_parallel, plan.ulysses) == expected


@pytest.mark.parametrize(("given", "field"), [
    (dict(gpus=2, cfg_parallel=2, ulysses=2), "ulysses"),
    (dict(gpus=4, cfg_parallel=2, ulysses=1), "cfg_parallel"),
    (dict(gpus=2, cfg_parallel=3), "cfg_parallel"),
    (dict(gpus=2, tensor_parallel=2), "tensor_parallel"),
    (dict(gpus=0), "gpus"),
    (dict(gpus=True), "gpus"),
    (dict(gpus=2, ulysses=1.5), "ulysses"),
    (dict(gpus=6, ulysses=2), "ulysses"),
])
def test_plan_refuses_inconsistent_degrees(given, field):
    gpus = given.pop("gpus")
    with pytest.raises(ValidationError) as info:
        ParallelPlan.build(gpus, **given)
    assert info.value.field == field and info.value.fix


def test_plan_speaks_serve_commands_vocabulary():
    plan = ParallelPlan.build(4, cfg_parallel=2, ulysses=2)
    argv = serve_command("nvidia/Cosmos3-Nano", **plan.serve_kwargs()).argv
    assert argv[argv.index("--cfg-parallel-size") + 1] == "2" and argv[argv.index("--ulysses-degree") + 1] == "2"
    assert "--tensor-parallel-size" not in argv
    assert plan.rank_groups() == ([[0, 1], [2, 3]], [[0, 2], [1, 3]])


def test_ulysses_must_divide_the_heads():
    ParallelPlan.build(2, ulysses=2).check_model({"num_attention_heads": 32})
    with pytest.raises(ValidationError, match=r"\[1, 2, 4, 8, 16, 32\]") as info:
        ParallelPlan.build(3, ulysses=3).check_model({"num_attention_heads": 32})
    assert info.value.field == "ulysses"


def test_cfg_parallel_refuses_guidance_one_before_starting_workers():
    backend = DiffusersBackend(gpus=2, device="cpu", progress=False)
    with pytest.raises(ValidationError) as info:
        backend.generate(GenerationRequest(mode="t2v", prompt="a robot", guidance_scale=1.0))
    assert info.value.field == "guidance_scale" and backend._workers is None
    DiffusersBackend(gpus=2, ulysses=2, device="cpu").plan.check_request(
        GenerationRequest(mode="t2v", prompt="a robot", guidance_scale=1.0))  # Ulysses alone is fine


@pytest.mark.parametrize(("kwargs", "field"), [
    (dict(gpus=2, device="cuda:1"), "device"),
    (dict(gpus=2, device="cpu", device_map="balanced"), "device_map"),
    (dict(memory="32GB", device="cuda"), "memory"),
    (dict(memory="24GB", device="cpu"), "memory"),
    (dict(memory="24GB", device="cuda", device_map="balanced"), "device_map"),
    (dict(offload="group", device_map="balanced"), "device_map"),
    (dict(offload="disk"), "offload"),
    (dict(offload="group", fast=True), "fast"),
    (dict(weight_storage="fp8", fast=True), "fast"),
    (dict(weight_storage="fp4"), "weight_storage"),
    (dict(fp8=True), "fp8"),  # renamed: refused with a pointer to weight_storage and to precision='fp8'
    (dict(fp8=False), "fp8"),
    (dict(vae_tiling="yes"), "vae_tiling"),
    (dict(gpus=2, device="cpu", fast=FastOptions(batch_cfg=True)), "fast"),
    (dict(gpus=2, ulysses=2, device="cpu", fast=FastOptions(batch_cfg=True)), "fast"),
    (dict(gpus=2, ulysses=2, device="cpu", fast=FastOptions(cuda_graphs=True)), "fast"),
])
def test_backend_refuses_conflicting_options(kwargs, field):
    with pytest.raises(ValidationError) as info:
        DiffusersBackend(**kwargs)
    assert info.value.field == field and info.value.fix


def test_more_gpus_than_visible_is_refused(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValidationError, match="only 1 CUDA GPUs") as info:
        DiffusersBackend(gpus=2, device="cuda")
    assert info.value.field == "gpus"


@pytest.mark.parametrize(("memory", "weights", "offload"), [
    ("24GB", NANO_BYTES, "group"), ("48GB", NANO_BYTES, "model"), ("80GB", NANO_BYTES, "none"),
    ("80GB", SUPER_BYTES, "group"), ("48 gb", NANO_BYTES, "model"),
])
def test_presets_choose_offloading_by_card_and_model_size(memory, weights, offload):
    planned = plan_memory(resolve_memory(memory, device="cuda"), weights)
    assert (planned.offload, planned.vae_tiling, planned.weight_storage) == (offload, True, None)


def test_explicit_memory_settings_win_over_the_preset():
    planned = plan_memory(resolve_memory("24GB", offload=False, vae_tiling=False, device="cuda"), NANO_BYTES)
    assert (planned.offload, planned.vae_tiling) == ("none", False)
    planned = plan_memory(resolve_memory("48GB", weight_storage="fp8", device="cuda"), NANO_BYTES)
    assert (planned.offload, planned.weight_storage) == ("model", "fp8")
    with pytest.raises(ValidationError) as info:  # a preset that must offload this model cannot run the fast path
        plan_memory(resolve_memory("24GB", device="cuda"), NANO_BYTES, fast=True)
    assert info.value.field == "fast"
    assert plan_memory(MemorySettings(preset="80GB"), NANO_BYTES, fast=True).offload == "none"


def test_bench_builds_multi_gpu_runners_with_the_plans_asked_for():
    from cosmos_helpers.bench import _diffusers_backends

    made = _diffusers_backends(True, "cpu", None, False, None, gpus=["2", "2:ulysses", "4"])
    plans = {name: (b.plan.gpus, b.plan.cfg_parallel, b.plan.ulysses) for name, b in made.items()}
    assert plans == {"stock": (1, 1, 1), "fast": (1, 1, 1), "fast-2gpu": (2, 2, 1), "fast-2gpu-ulysses": (2, 1, 2),
                     "fast-4gpu": (4, 2, 2)}
    worker = made["fast-2gpu"]
    assert worker.builder.target.endswith("build_random_nano_pipeline") and worker.fast
    assert dict(worker.builder.kwargs) == {"sound": False, "size": "nano"}


def test_a_memory_preset_without_cuda_is_refused(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValidationError, match="CUDA") as info:
        DiffusersBackend(memory="24GB")
    assert info.value.field == "memory"


def test_bench_cli_takes_gpus_memory_and_super(monkeypatch):
    import argparse

    from cosmos_helpers import bench

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args(["--gpus", "2,2:ulysses", "--memory", "24GB", "--random-super"])
    seen = {}

    def record(**kwargs):
        seen.update(kwargs)
        raise KeyboardInterrupt  # stop before anything runs

    monkeypatch.setattr(bench, "run_benchmark", record)
    with pytest.raises(KeyboardInterrupt):
        bench.run(args)
    assert seen["gpus"] == ["2", "2:ulysses"] and seen["memory"] == "24GB" and seen["random_nano"] == "super"
    assert "t2v:720:189" in bench.DEFAULT_CASES["nano"]


def test_ulysses_degree_the_model_cannot_split_is_refused_before_workers_start():
    from cosmos_helpers.models.tiny import tiny_model_path

    backend = DiffusersBackend(gpus=4, ulysses=4, device="cpu", progress=False)
    random_tiny = str(tiny_model_path(0))  # the random-weight tiny model: 2 attention heads
    with pytest.raises(ValidationError, match=r"use ulysses in \[1, 2\]") as info:
        backend.generate(GenerationRequest(mode="t2v", prompt="a robot", model=random_tiny))
    assert info.value.field == "ulysses" and backend._workers is None
