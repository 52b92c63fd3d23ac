"""Cosmos3 sizes: the recorded shapes give the published parameter counts, and the random builder takes them."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from cosmos_helpers.errors import ValidationError  # noqa: E402
from cosmos_helpers.models.shapes import TRANSFORMER_SHAPES, parameter_count, transformer_shape  # noqa: E402

SMALL = dict(hidden_size=64, intermediate_size=128, head_dim=16, num_key_value_heads=2, num_hidden_layers=2,
             rope_axes_dim=[4, 2, 2], vocab_size=264)


def test_nano_is_diffusers_default_and_super_is_the_64b_mot():
    import inspect

    from diffusers import Cosmos3OmniTransformer

    params = inspect.signature(Cosmos3OmniTransformer.__init__).parameters
    defaults = {name: p.default for name, p in params.items() if p.default is not inspect.Parameter.empty}
    for name, value in TRANSFORMER_SHAPES["nano"].items():
        assert defaults.get(name) == value or (name == "rope_axes_dim" and defaults[name] is None), name
    assert round(parameter_count("nano") / 1e9, 2) == 15.16
    assert round(parameter_count("super") / 1e9, 1) == 64.0  # "64bm32b": a 64 B MoT of Qwen3-VL-32B towers
    with pytest.raises(ValidationError):
        transformer_shape("ultra")


@pytest.mark.parametrize("size", ["nano", "super"])
def test_random_builder_takes_the_size_and_builds_in_the_target_dtype(size):
    from cosmos_helpers.models.random_nano import build_random_nano_pipeline

    heads = TRANSFORMER_SHAPES[size]["num_attention_heads"] // 8
    pipe = build_random_nano_pipeline("cpu", "bfloat16", size=size, transformer_overrides=dict(
        SMALL, num_attention_heads=heads), vae_overrides=dict(base_dim=4, decoder_base_dim=4, num_res_blocks=1))
    config = pipe.transformer.config
    assert config.num_attention_heads == heads and config.rope_theta == 5_000_000.0
    assert pipe.transformer.layers[0].mlp.gate_proj.weight.dtype == torch.bfloat16
    assert next(pipe.transformer.time_embedder.parameters()).dtype == torch.float32
    assert torch.get_default_dtype() == torch.float32


def test_a_builders_pipeline_keeps_its_dtypes_through_the_backend():
    """A builder's bf16 pipeline runs in bf16: the backend's own class is put on the same components without the
    float32 cast diffusers' ``from_pipe`` applies (an H100 run's "bf16" row computed in float32 before this)."""
    from cosmos_helpers.backends.diffusers import Builder, DiffusersBackend

    builder = Builder.of("cosmos_helpers.models.random_nano:build_random_nano_pipeline", transformer_overrides=dict(
        SMALL, num_attention_heads=4), vae_overrides=dict(base_dim=4, decoder_base_dim=4, num_res_blocks=1))
    backend = DiffusersBackend(device="cpu", dtype="bfloat16", progress=False, builder=builder)
    pipe = backend.pipeline("nvidia/Cosmos3-Nano")
    assert type(pipe).__name__ == "Cosmos3GuidedPipeline"
    assert pipe.transformer.layers[0].mlp.gate_proj.weight.dtype == torch.bfloat16
    assert next(pipe.transformer.time_embedder.parameters()).dtype == torch.float32
    assert next(pipe.vae.parameters()).dtype == torch.bfloat16
    backend.close()
