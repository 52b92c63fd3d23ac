"""How the fast path's switches are decided, and the attention choices a host can and cannot run."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from cosmos_helpers.errors import ValidationError  # noqa: E402
from cosmos_helpers.fast import SMALL_PASS_TOKENS, FastOptions, _resolve  # noqa: E402
from cosmos_helpers.fast import attention  # noqa: E402


def test_cuda_defaults_keep_batching_and_graphs_to_small_passes():
    resolved = _resolve(FastOptions(), cuda=True)
    assert resolved.batch_cfg is True and resolved.cuda_graphs is True
    assert resolved.batch_max_tokens == resolved.graph_max_tokens == SMALL_PASS_TOKENS


def test_an_explicit_switch_means_every_size_and_an_explicit_limit_wins():
    resolved = _resolve(FastOptions(batch_cfg=True, cuda_graphs=True), cuda=True)
    assert resolved.batch_max_tokens is None and resolved.graph_max_tokens is None
    resolved = _resolve(FastOptions(batch_max_tokens=100_000, graph_max_tokens=7), cuda=True)
    assert (resolved.batch_max_tokens, resolved.graph_max_tokens) == (100_000, 7)


def test_cpu_defaults_leave_the_gpu_switches_off_and_unlimited():
    resolved = _resolve(FastOptions(), cuda=False)
    assert resolved.batch_cfg is False and resolved.cuda_graphs is False
    assert resolved.batch_max_tokens is None and resolved.graph_max_tokens is None


def test_flash3_is_offered_only_where_it_is_installed():
    assert (attention.FLASH3 in attention.CANDIDATES) == attention.flash3_available()
    if attention.flash3_available():
        pytest.skip("FlashAttention-3 is installed here")
    with pytest.raises(ValidationError, match="fast.attention.*FlashAttention-3.*attention='auto'"):
        attention.check_backend("flash3")


def test_unknown_attention_is_refused_before_a_model_loads():
    from cosmos_helpers.backends.diffusers import DiffusersBackend

    with pytest.raises(ValidationError, match="fast.attention.*'cudnn2'.*native, flash, cudnn"):
        DiffusersBackend(device="cpu", fast=FastOptions(attention="cudnn2"))


def test_flash3_goes_through_diffusers_flash3_backend_in_its_layout(monkeypatch):
    """``sdpa(backend="flash3")`` hands diffusers' dispatcher [batch, tokens, heads, dim] tensors, GQA unexpanded."""
    import torch
    from diffusers.models import attention_dispatch

    seen = {}

    def dispatch(query, key, value, *, is_causal, backend):
        seen.update(q=tuple(query.shape), k=tuple(key.shape), causal=is_causal, backend=backend)
        return torch.zeros_like(query)

    monkeypatch.setattr(attention_dispatch, "dispatch_attention_fn", dispatch)
    out = attention.sdpa(torch.ones(5, 4, 8), torch.ones(7, 2, 8), torch.ones(7, 2, 8), backend="flash3")
    assert out.shape == (5, 4, 8)
    assert seen == {"q": (1, 5, 4, 8), "k": (1, 7, 2, 8), "causal": False, "backend": "_flash_3"}
