"""Memory settings reach the pipeline: group offloading, VAE tiling and FP8 storage on the tiny model (CPU)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from cosmos_helpers import DiffusersBackend, GenerationRequest  # noqa: E402

REQUEST = GenerationRequest(mode="t2v", prompt="a robot stacks cubes", num_inference_steps=2)


def test_group_offload_and_tiling_are_installed_and_keep_outputs(tiny_backend):
    from diffusers.hooks import HookRegistry

    backend = DiffusersBackend(device="cpu", offload="group", vae_tiling=True, progress=False)
    generation = backend.generate(REQUEST)
    pipe = backend.pipeline("tiny")
    assert generation.provenance["memory"] == {"preset": None, "offload": "group", "vae_tiling": True,
                                               "weight_storage": None,
                                               "use_stream": False}
    hooks = HookRegistry.check_if_exists_or_initialize(pipe.transformer.layers[0]).hooks
    assert "group_offloading" in hooks
    assert pipe.vae.use_tiling
    np.testing.assert_array_equal(generation.frames, tiny_backend.generate(REQUEST).frames)


def test_fp8_storage_casts_weights_and_computes_in_the_model_dtype(tiny_backend):
    backend = DiffusersBackend(device="cpu", weight_storage="fp8", progress=False)
    generation = backend.generate(REQUEST)
    transformer = backend.pipeline("tiny").transformer
    assert transformer.layers[0].mlp.gate_proj.weight.dtype == torch.float8_e4m3fn
    assert transformer.norm.weight.dtype == torch.float32  # norms and embeddings stay (diffusers' skip patterns)
    assert generation.provenance["memory"]["weight_storage"] == "fp8"
    assert generation.settings["weight_storage"] == "fp8"
    assert generation.frames.shape == tiny_backend.generate(REQUEST).frames.shape
