"""Stacked q/k/v and gate/up weights: one copy of each weight, kept in step with the model, undone cleanly."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from cosmos_helpers.fast import disable_fast_path, enable_fast_path, fast_path_stats  # noqa: E402
from cosmos_helpers.fast.projections import FusedProjections  # noqa: E402


@pytest.fixture()
def transformer():
    from cosmos_helpers.models.tiny import build_tiny_pipeline

    return build_tiny_pipeline(0).transformer


def _storage(t):
    return t.untyped_storage().data_ptr()


def _layer_weights(transformer):
    layer = transformer.layers[0]
    a, m = layer.self_attn, layer.mlp_moe_gen
    return [a.add_q_proj.weight, a.add_k_proj.weight, a.add_v_proj.weight, m.gate_proj.weight, m.up_proj.weight]


def test_each_weight_is_stored_once_and_values_are_unchanged(transformer):
    before = [w.detach().clone() for w in _layer_weights(transformer)]
    fused = FusedProjections(transformer)
    assert fused.available
    q, k, v, gate, up = _layer_weights(transformer)
    assert _storage(q) == _storage(k) == _storage(v) == _storage(fused.qkv[0].weight)
    assert _storage(gate) == _storage(up) == _storage(fused.gate_up[0].weight)
    for old, new in zip(before, _layer_weights(transformer)):
        assert torch.equal(old, new)


def test_stacked_product_equals_separate_products(transformer):
    fused = FusedProjections(transformer)
    x = torch.randn(7, transformer.config.hidden_size)
    for stack in (fused.qkv[0], fused.gate_up[0]):
        for a, b in zip(stack(x, True), stack(x, False)):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_replaced_weights_are_stacked_again(transformer):
    fused = FusedProjections(transformer)
    q = transformer.layers[0].self_attn.add_q_proj
    q.weight.data = q.weight.data.clone() * 2  # what loading new weights or .to() does: new storage
    assert fused.refresh()
    assert fused.refreshes == 2
    assert torch.equal(fused.qkv[0].weight[: q.weight.shape[0]], q.weight)
    assert _storage(q.weight) == _storage(fused.qkv[0].weight)


def test_unfuse_gives_every_linear_its_own_storage(transformer):
    fused = FusedProjections(transformer)
    before = [w.detach().clone() for w in _layer_weights(transformer)]
    fused.unfuse()
    weights = _layer_weights(transformer)
    assert len({_storage(w) for w in weights}) == len(weights)
    for old, new in zip(before, weights):
        assert torch.equal(old, new)


def test_disable_fast_path_unfuses_so_saving_works(tmp_path):
    from cosmos_helpers.models.tiny import build_tiny_pipeline

    pipe = build_tiny_pipeline(0)
    enable_fast_path(pipe, fuse_projections=True)
    assert fast_path_stats(pipe)["options"]["fuse_projections"] is True
    disable_fast_path(pipe)
    pipe.transformer.save_pretrained(tmp_path / "t")  # safetensors refuses tensors that share storage
    assert (tmp_path / "t" / "config.json").exists()
