"""The Wan2.2 VAE decode (after the transformer, the largest cost of a short video) with cuDNN's algorithm search,
optionally channels-last, and the video to uint8 on the device.

cuDNN's default heuristics are not the fastest for these 3-D shapes, and Hopper transposes a channels-first tensor
around each convolution. H200, 189 frames: 0.83 -> 0.70 s at 256p, 4.14 -> 3.80 s at 480p (the first decode of a
shape pays the search). Images stay channels-first (t2i 720p: +1.6 s of search, no gain). Both only reorder sums
inside convolutions: pixels can differ at bf16 rounding, latents cannot. Stock converts to uint8 on the host from
float32 (480p, 189 frames: 0.9 GB, about 0.7 s, against 7 ms for :func:`video_to_host_uint8`).
"""

from __future__ import annotations

import numpy as np
import torch


class FastDecode:
    """Bound as ``vae.decode``; ``restore()`` gives the weights their original layout back."""

    def __init__(self, vae, *, cudnn_benchmark: bool = True, channels_last: bool = False) -> None:
        self.vae, self.decode = vae, vae.decode
        self.cudnn_benchmark, self.channels_last = cudnn_benchmark, channels_last
        self._converted, self.active = False, True
        self.__wrapped__ = self.decode
        self.__doc__ = getattr(self.decode, "__doc__", None)

    def _set_layout(self, channels_last: bool) -> None:
        """3-D convolution weights channels-last or back (``Module.to(memory_format=...)`` refuses 4-D/1-D ones)."""
        if channels_last == self._converted:
            return
        layout = torch.channels_last_3d if channels_last else torch.contiguous_format
        with torch.no_grad():
            for module in self.vae.modules():
                if isinstance(module, torch.nn.Conv3d):
                    module.weight.data = module.weight.data.contiguous(memory_format=layout)
        self._converted = channels_last

    def restore(self) -> None:
        self._set_layout(False)

    def __call__(self, z: torch.Tensor, *args, **kwargs):
        if not self.active:
            self.restore()
            return self.decode(z, *args, **kwargs)
        if self.channels_last and z.ndim == 5 and z.shape[2] > 1:
            self._set_layout(True)
            z = z.contiguous(memory_format=torch.channels_last_3d)
        else:
            self.restore()  # images: no gain measured, only a longer first call
        previous = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = self.cudnn_benchmark or previous
        try:
            return self.decode(z, *args, **kwargs)
        finally:
            torch.backends.cudnn.benchmark = previous


def video_to_host_uint8(video: torch.Tensor) -> np.ndarray:
    """``[T, C, H, W]`` (or ``[1, T, C, H, W]``) floats in [0, 1] on any device -> ``(T, H, W, C)`` uint8 numpy."""
    if video.ndim == 5:
        video = video[0]
    frames = video.float().mul(255.0).round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1)
    if not frames.is_cuda:
        return frames.contiguous().numpy()
    return torch.empty(frames.shape, dtype=torch.uint8, pin_memory=True).copy_(frames).numpy()
