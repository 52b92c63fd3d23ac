"""The ``tiny`` model's FP8 revision: the trained tiny Cosmos3 quantized the way NVIDIA's ``revision="fp8"`` is.

As the hub revision (``protocol.fp8``): the decoder layers' linears of both towers in static per-tensor FP8 (E4M3
weights *and* calibrated activation scales, ModelOpt's ``FP8_DEFAULT_CFG``), the rest in high precision, the ModelOpt
state beside the weights and ``quantization_config`` (``runtime.diffusion_step_policy``) in the transformer config;
calibrated on training-split captions, so it loads through the hub revision's path. Needs ``nvidia-modelopt``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..protocol import fp8 as facts
from . import tiny
from .tiny_trained import WEIGHTS, trained_tiny_path, weights_digest

FORMAT_VERSION = 1
# ModelOpt quant_cfg (its legacy mapping form, which NVIDIAModelOptConfig serialises): every quantizer off, then FP8
# E4M3 per-tensor (axis None) weights and inputs on the decoder layers, as ModelOpt's FP8_DEFAULT_CFG sets them.
QUANT_CFG: dict[str, Any] = {
    "quant_cfg": {"*": {"enable": False},
                  "*layers.*weight_quantizer": {"num_bits": (4, 3), "axis": None},
                  "*layers.*input_quantizer": {"num_bits": (4, 3), "axis": None}},
    "algorithm": "max",
}
CALIBRATION = {"text2video": 6, "image2video": 2}  # requests per mode, training-split captions (never held out)


def tiny_fp8_path(root: str | Path | None = None, weights: str | Path = WEIGHTS) -> Path:
    """The folder of the tiny model's FP8 revision, built from the shipped weights on first use."""
    import modelopt
    name = f"tiny-cosmos3-world-fp8-{weights_digest(weights)}-modelopt{modelopt.__version__}-v{FORMAT_VERSION}"
    target = tiny.cache_root(root) / name
    return tiny.cached_build(target, "model_index.json", lambda staging: build(staging, weights))


def build(out: str | Path, weights: str | Path = WEIGHTS, policy: dict[str, Any] | None = None) -> Path:
    """Quantize the trained tiny pipeline and save it as a ModelOpt FP8 checkpoint at ``out`` with ``policy``
    (default: the published :data:`~cosmos_helpers.protocol.fp8.OFFICIAL_POLICY`) in its transformer config."""
    import torch
    from diffusers import Cosmos3OmniPipeline
    pipe = Cosmos3OmniPipeline.from_pretrained(str(trained_tiny_path(weights=weights)), dtype=torch.float32,
                                               enable_safety_checker=False)
    pipe.set_progress_bar_config(disable=True)
    quantize(pipe, lambda: calibrate(pipe, calibration_requests()), policy)
    return save(pipe, out)


def quantize(pipe: Any, calibration: Any, policy: dict[str, Any] | None = None) -> None:
    """Quantize ``pipe``'s transformer in place the way the revision is (:data:`QUANT_CFG`, activation scales from
    ``calibration()``, then real FP8 weights) and record its ``quantization_config`` with ``policy``."""
    import modelopt.torch.quantization as mtq
    from diffusers import NVIDIAModelOptConfig
    mtq.quantize(pipe.transformer, QUANT_CFG, forward_loop=lambda _model: calibration())
    mtq.compress(pipe.transformer)
    config = NVIDIAModelOptConfig(quant_type=facts.QUANT_TYPE, weight_only=False, modelopt_config=QUANT_CFG).to_dict()
    config["runtime"] = {"diffusion_step_policy": json.loads(json.dumps(dict(policy or facts.OFFICIAL_POLICY)))}
    pipe.transformer.register_to_config(quantization_config=config)


def save(pipe: Any, out: str | Path) -> Path:
    """``pipe`` (quantized) saved under ModelOpt's checkpointing, as diffusers' own pipeline class."""
    import modelopt.torch.opt as mto
    from diffusers import Cosmos3OmniPipeline
    mto.enable_huggingface_checkpointing()
    plain = pipe if type(pipe) is Cosmos3OmniPipeline else Cosmos3OmniPipeline(**pipe.components,
                                                                                enable_safety_checker=False)
    plain.save_pretrained(out)
    return Path(out)


def calibration_requests() -> list[Any]:
    """The calibration set: training-split captions (a seed of their own) through the tiny profile's settings."""
    from ..request import GenerationRequest
    from ..world.render import render_uint8
    from ..world.scenes import caption, sample_scenes
    modes = [mode for mode, count in CALIBRATION.items() for _ in range(count)]
    scenes = sample_scenes(len(modes), seed=1234, split="train", width=160, height=96)
    return [GenerationRequest(mode=mode, prompt=caption(scene), seed=seed,
                              image=render_uint8([scene], width=160, height=96, frames=1)[0][0]
                              if mode == "image2video" else None)
            for seed, (mode, scene) in enumerate(zip(modes, scenes))]


def calibrate(pipe: Any, requests: list[Any]) -> None:
    """Run ``requests`` through the pipeline's own call, as a generation sends them (latents only)."""
    import torch
    from ..backends.diffusers.runner import StockLoop
    with torch.inference_mode():
        for request in (request.resolve() for request in requests):
            kwargs = StockLoop().call_kwargs(request)
            pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(request.seed), output_type="latent")
