"""The fast VAE decode: same pixels (to rounding), weights restored to their layout afterwards."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from cosmos_helpers.fast.vae import FastDecode  # noqa: E402


def _conv3d_weights(vae):
    return [m.weight for m in vae.modules() if isinstance(m, torch.nn.Conv3d)]


def test_channels_last_decode_matches_and_restores():
    from cosmos_helpers.models.tiny import build_tiny_pipeline

    vae = build_tiny_pipeline(0).vae
    z = torch.randn(1, vae.config.z_dim, 3, 4, 6, generator=torch.Generator().manual_seed(0))
    image = z[:, :, :1]
    with torch.no_grad():
        reference = vae.decode(z).sample
        reference_image = vae.decode(image).sample
        decode = FastDecode(vae, cudnn_benchmark=False, channels_last=True)
        got = decode(z).sample
        assert all(w.is_contiguous(memory_format=torch.channels_last_3d) for w in _conv3d_weights(vae))
        got_image = decode(image).sample  # one latent frame: decoded channels-first, as stock
        assert all(w.is_contiguous() for w in _conv3d_weights(vae))
        decode(z)
        decode.restore()
    assert all(w.is_contiguous() for w in _conv3d_weights(vae))
    torch.testing.assert_close(got, reference, rtol=1e-4, atol=1e-5)
    assert torch.equal(got_image, reference_image)


def test_cudnn_benchmark_flag_is_scoped_to_the_call():
    from cosmos_helpers.models.tiny import build_tiny_pipeline

    vae = build_tiny_pipeline(0).vae
    seen = []
    original = vae.decode

    def spy(z, *args, **kwargs):
        seen.append(torch.backends.cudnn.benchmark)
        return original(z, *args, **kwargs)

    vae.decode = spy
    before = torch.backends.cudnn.benchmark
    FastDecode(vae, cudnn_benchmark=True)(torch.randn(1, vae.config.z_dim, 1, 2, 2))
    assert seen == [True] and torch.backends.cudnn.benchmark == before
