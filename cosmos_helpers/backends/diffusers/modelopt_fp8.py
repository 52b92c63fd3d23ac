"""NVIDIA's ModelOpt FP8 checkpoints in process: where the weights come from, ModelOpt's restore and GEMMs, what ran.

``precision="fp8"`` loads the FP8 revision as the hub does everywhere: ModelOpt's ``enable_huggingface_checkpointing()``
(``from_pretrained`` then restores ``transformer/modelopt_state.pth``), then ``from_pretrained(hub_id,
revision="fp8")`` (a local folder, or the tiny model's FP8 build, as it is); diffusers' own ``__call__`` runs the
checkpoint's per-step policy, the request's overrides as its ``mixed_precision_*`` arguments. ModelOpt 0.47.0
registers no FP8 GEMM itself, and without one a restored FP8 linear fails (its fallback quantizes the E4M3 weight
again): :func:`enable_modelopt` imports ModelOpt's (``torch._scaled_mm``, CUDA SM89+); elsewhere (a CPU, an older GPU;
the real-quant path also opens an NVTX range a CPU torch lacks) :func:`place` installs :func:`emulated_w8a8`.
"""

from __future__ import annotations

import functools
import itertools
import json
import types
from pathlib import Path
from typing import Any

from ...errors import BackendUnavailableError, ValidationError
from ...models.tiny_distilled import MODEL_NAME as TINY_DISTILLED
from ...models.tiny_edge import MODEL_NAME as TINY_EDGE
from ...precision import FP8, check_for_backend, describe
from ...protocol import fp8 as facts
from ...request import GenerationRequest

INSTALL = f"pip install 'nvidia-modelopt=={facts.MODELOPT_VERSION}' (or pip install -e '.[fp8]')"
CUDA_GEMM = "torch._scaled_mm (ModelOpt fp8_per_tensor_gemm)"
CPU_GEMM = "emulated: E4M3 activation with the static scale, dequantized product (no FP8 GEMM on this device)"


def is_fp8(request: GenerationRequest) -> bool:
    return isinstance(request.precision, FP8)


def is_modelopt_fp8(quantization: dict[str, Any] | None) -> bool:
    return bool(quantization) and quantization.get("quant_method") == facts.QUANT_METHOD and \
        str(quantization.get("quant_type", "")).upper().startswith(facts.QUANT_TYPE)


def check_request(request: GenerationRequest, *, fast: Any, weight_storage: str | None, gpus: int = 1,
                  distilled: bool = False) -> None:
    """Refuse, before loading, what the request's precision cannot run with: the FP8 revision runs on one GPU
    through the base pipeline's own call (``distilled``: the request's checkpoint is a distilled one)."""
    check_for_backend(request.precision, "diffusers")
    if is_fp8(request) and (gpus > 1 or distilled):
        where = f"gpus={gpus}" if gpus > 1 else f"the distilled {request.model}"
        raise ValidationError("precision", f"the ModelOpt FP8 revision runs here on one GPU through the base "
                              f"pipeline's own call, not on {where}.",
                              "use DiffusersBackend(gpus=1) with a base checkpoint for precision='fp8', or a "
                              "vLLM-Omni server (serve_command(model, precision='fp8')).")
    model = request.model
    local = Path(model).expanduser()
    config, quantization = local / "transformer" / "config.json", None  # a local checkpoint's quantization_config
    if config.is_file():
        quantization = json.loads(config.read_text(encoding="utf-8")).get("quantization_config")
    if not is_fp8(request):
        if is_modelopt_fp8(quantization):
            raise ValidationError("precision", f"{model} is a ModelOpt FP8 checkpoint, and the request leaves "
                                  "precision at the bf16 default, so the manifest would say bf16 for an FP8 run.",
                                  "add precision='fp8' to the request (or point model= at the bf16 checkpoint).")
        return
    if fast:
        raise ValidationError("fast", "the fast path cannot run a ModelOpt FP8 checkpoint: its stacked projections "
                              "read each linear's raw .weight (FP8 bytes without ModelOpt's scales), and its CUDA "
                              "graphs would freeze the per-step W8A16/W8A8 switch.",
                              "use DiffusersBackend(fast=False) for precision='fp8' (diffusers' own loop runs the "
                              "checkpoint's schedule), or the bf16 checkpoint with fast=True.")
    if weight_storage:
        raise ValidationError("weight_storage", "the ModelOpt FP8 checkpoint already stores its weights in FP8; "
                              "layerwise casting would cast ModelOpt's layers a second time.",
                              "drop weight_storage= for precision='fp8'.")
    if model in (TINY_DISTILLED, TINY_EDGE):
        raise ValidationError("precision", f"the embedded {model} stand-in has no FP8 revision.",
                              "use profile 'tiny' (its FP8 build) or a hub checkpoint with precision='fp8'.")
    if local.is_dir() and not is_modelopt_fp8(quantization):
        raise ValidationError("model", f"{model} is not a ModelOpt FP8 checkpoint (its transformer/config.json has no "
                              "quantization_config with quant_method 'modelopt', quant_type 'FP8').",
                              "point model= at the downloaded FP8 revision (hf download <repo> --revision fp8 "
                              "--local-dir DIR), or use the hub id, which loads revision='fp8'.")
    if request.mode == "image2image" and not request.precision.native_throughout:
        raise ValidationError("precision", "image editing runs the transformer outside the pipeline's denoising loop, "
                              "where diffusers applies the per-step policy.",
                              "use precision=FP8(mixed=False) (W8A8 on every step) for image2image.")
    modelopt_available()


def modelopt_available() -> None:
    import importlib.util

    if importlib.util.find_spec("modelopt") is None:
        raise BackendUnavailableError(f"loading a ModelOpt FP8 checkpoint needs NVIDIA ModelOpt: {INSTALL}.")


@functools.lru_cache(maxsize=None)
def enable_modelopt() -> None:
    """ModelOpt's checkpoint restore for diffusers and its FP8 GEMM (once per process)."""
    modelopt_available()
    import modelopt.torch.opt as mto
    import modelopt.torch.quantization.backends.fp8_per_tensor_gemm  # noqa: F401  registers ModelOpt's FP8 GEMM

    mto.enable_huggingface_checkpointing()


def fp8_linears(module: Any) -> list[Any]:
    """The restored ModelOpt FP8 linears of ``module``: an E4M3 weight with one scale, an enabled input quantizer."""
    import torch

    return [m for m in module.modules() if hasattr(m, "_should_run_real_quant_gemm")
            and getattr(m, "weight", None) is not None and m.weight.dtype == torch.float8_e4m3fn
            and m.input_quantizer.is_enabled and m.input_quantizer.amax is not None
            and getattr(m.weight_quantizer, "_scale", None) is not None and m.weight_quantizer._scale.numel() == 1]


def place(pipe: Any, device: str) -> str:
    """The W8A8 GEMM the FP8 linears use on ``device``; without FP8 tensor cores, :func:`emulated_w8a8` as forward."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda" and torch.cuda.get_device_capability(dev) >= (8, 9):
        return CUDA_GEMM
    for layer in fp8_linears(pipe.transformer):
        layer.forward = types.MethodType(_emulated_forward, layer)
    return CPU_GEMM


def _emulated_forward(self, input, *args, **kwargs):
    return emulated_w8a8(self, input, self.weight, self.bias)


def emulated_w8a8(module, input, weight, bias=None):
    """W8A8 with ModelOpt's numbers: ``x`` to E4M3 with the static input scale (amax/448, clamped, as
    ``fp8_per_tensor_gemm``), the E4M3 weight with its scale, one product in ``x``'s dtype."""
    import torch
    import torch.nn.functional as F

    finfo = torch.finfo(torch.float8_e4m3fn)
    scale_a = module.input_quantizer.amax.float().to(input.device) / finfo.max
    x8 = (input.float() / scale_a).clamp(finfo.min, finfo.max).to(torch.float8_e4m3fn)
    x = (x8.float() * scale_a).to(input.dtype)
    w = (weight.data.float() * module.weight_quantizer._scale.float().to(weight.device)).to(input.dtype)
    return F.linear(x, w, None if bias is None else bias.to(input.dtype))


def provenance(pipe: Any, request: GenerationRequest, gemm: str | None = None) -> dict[str, Any]:
    """What ran, for the manifest: the choice and, for FP8, diffusers' own per-step trace and the W8A8 GEMM."""
    out = describe(request.precision, "diffusers")
    if not is_fp8(request):
        return {"precision": out}
    trace = list(getattr(pipe, "_mixed_precision_trace", None) or [])
    config = getattr(pipe, "_mixed_precision_config", None)
    runs = ", ".join(f"{len(list(run))} {name}" for name, run in itertools.groupby(trace))  # "3 W8A16, 29 W8A8, ..."
    out.update(steps=runs, steps_w8a16=[i for i, name in enumerate(trace) if name == facts.TRACE_HIGH],
               w8a8_gemm=gemm if gemm == CPU_GEMM else _gemm_chosen(pipe))
    if config is not None:
        out["resolved"] = {"format": config.format, "first_steps": config.first_steps, "last_steps": config.last_steps,
                           "reasoner": config.reasoner_policy}
    return {"precision": out}


def _gemm_chosen(pipe: Any) -> str:
    """What ModelOpt chose for the W8A8 products (cached on a layer at its first W8A8 call)."""
    for layer in fp8_linears(pipe.transformer):
        if "_real_quant_gemm_impl" in layer.__dict__:
            return CUDA_GEMM if layer._real_quant_gemm_impl is not None else "none: ModelOpt's fallback forward"
    return "no W8A8 product has run yet"
