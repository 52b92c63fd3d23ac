"""Frames converted on the device are the frames the host-side conversion makes."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cosmos_helpers import media  # noqa: E402
from cosmos_helpers.fast.vae import video_to_host_uint8  # noqa: E402


def test_same_values_as_host_conversion_including_rounding_ties():
    generator = torch.Generator().manual_seed(0)
    video = torch.rand(3, 3, 8, 10, generator=generator)
    ties = (torch.arange(256, dtype=torch.float32) + 0.5) / 255.0  # x * 255 lands on .5: half-to-even decides
    video.view(-1)[:256] = ties
    video.view(-1)[256:260] = torch.tensor([-0.2, 0.0, 1.0, 1.3])  # clipped both ways
    expected = media.to_uint8(video.permute(0, 2, 3, 1).numpy())
    got = video_to_host_uint8(video)
    assert got.dtype == np.uint8 and got.shape == (3, 8, 10, 3)
    np.testing.assert_array_equal(got, expected)


def test_batched_video_and_bf16_input():
    video = torch.rand(1, 2, 3, 4, 4).to(torch.bfloat16)
    expected = media.to_uint8(video[0].float().permute(0, 2, 3, 1).numpy())
    np.testing.assert_array_equal(video_to_host_uint8(video), expected)
