"""Fitting a Cosmos3 pipeline on a smaller GPU with diffusers' own machinery, picked by card size
(``DiffusersBackend(memory="24GB" | "48GB" | "80GB")``); explicit ``offload=``, ``vae_tiling=`` and ``weight_storage=``
win. Offloading and tiling keep the outputs up to kernel choice; the fast path needs the transformer resident."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from ..errors import ValidationError

PRESETS = {"24GB": 24, "48GB": 48, "80GB": 80}
HEADROOM_GIB = 16  # activations + VAE at 720p 189f beside resident weights (stock Nano: 41.0 GiB peak, 28.2 weights)
OFFLOADS = ("group", "model")
# weight_storage values: FP8 between layers, bf16 compute (not NVIDIA's FP8 checkpoint). It changes outputs, so no
# preset turns it on; on an H200 Nano's 24 GB preset took 362 s, not 432 s (less to stream), but a card that holds the
# bf16 weights is slower with it (a cast per layer per pass).
STORAGES = ("fp8",)
RENAMED = ("fp8", "fp8=True was FP8 weight *storage* with bf16 compute (diffusers' layerwise casting), which its name "
           "made look like NVIDIA's FP8 checkpoint.",
           "use weight_storage='fp8' for the same thing, or GenerationRequest(precision='fp8') for NVIDIA's ModelOpt "
           "FP8 revision (FP8 weights and activations, the checkpoint's per-step policy).")


@dataclass(frozen=True)
class MemorySettings:
    """What a backend does to fit its card; ``None`` fields are still the preset's to decide at load time."""

    preset: str | None = None
    offload: str | None = None  # "group" | "model" | "none"
    vae_tiling: bool | None = None
    weight_storage: str | None = None
    blocks_per_group: int = 1

    @property
    def hooks_transformer(self) -> bool:
        return self.offload in OFFLOADS or bool(self.weight_storage)

    def key(self) -> tuple:
        return tuple(asdict(self).values())


def normalize_preset(memory: Any) -> str:
    text = str(memory).upper().replace(" ", "").replace("GIB", "GB")
    text = text if text.endswith("GB") else f"{text}GB"
    if text not in PRESETS:
        raise ValidationError("memory", f"{memory!r} is not a memory preset.",
                              f"use the card size: one of {sorted(PRESETS, key=PRESETS.get)}.")
    return text


def resolve_memory(memory: Any = None, *, offload: Any = None, vae_tiling: bool | None = None,
                   weight_storage: str | None = None, device_map: Any = None, device: str | None = None,
                   fast: Any = False, fp8: Any = None) -> MemorySettings | None:
    """Validate the memory arguments of a backend (before any model loads); ``None`` when none is given."""
    if fp8 is not None:
        raise ValidationError(*RENAMED)
    if memory is None and offload is None and vae_tiling is None and weight_storage is None:
        return None
    preset = normalize_preset(memory) if memory is not None else None
    if offload is False:
        offload = "none"
    if offload not in (None, "none", *OFFLOADS):
        raise ValidationError("offload", f"{offload!r} is not an offload mode.",
                              "use 'group' (layers stream from CPU memory), 'model' (whole components move in "
                              "and out) or False.")
    if vae_tiling is not None and not isinstance(vae_tiling, bool):
        raise ValidationError("vae_tiling", f"expected True or False, got {vae_tiling!r}.", "pass vae_tiling=True.")
    if weight_storage not in (None, *STORAGES):
        raise ValidationError("weight_storage", f"{weight_storage!r} is not a storage dtype.",
                              "pass weight_storage='fp8' (weights stored in FP8, computed in bf16), or leave it out.")
    if device_map is not None:
        field = "memory" if preset else "offload" if offload not in (None, "none") else None
        if field:
            raise ValidationError("device_map", f"device_map places the weights itself, so it cannot be combined "
                                  f"with {field}={memory if preset else offload!r}.",
                                  f"drop device_map (the {field} setting places the weights), or drop {field}.")
    if preset and device is not None and not str(device).startswith("cuda"):
        raise ValidationError("memory", f"memory presets fit a CUDA card; device={device!r} has none to fit.",
                              "drop memory=, or run on a CUDA device.")
    if fast and (offload in OFFLOADS or weight_storage):
        what = f"offload={offload!r}" if offload in OFFLOADS else f"weight_storage={weight_storage!r}"
        raise ValidationError("fast", f"the fast path needs the whole transformer resident in its own dtype, "
                              f"which {what} does not give.", f"drop fast=True, or drop {what}.")
    return MemorySettings(preset=preset, offload=offload, vae_tiling=vae_tiling, weight_storage=weight_storage)


def plan_memory(settings: MemorySettings, weight_bytes: int, *, fast: Any = False) -> MemorySettings:
    """The preset's choices for a transformer of ``weight_bytes``: resident when its weights leave
    :data:`HEADROOM_GIB` (VAE and sound tokenizer offloaded under 80 GB), else its layers stream from CPU memory a
    group at a time on a side CUDA stream; the VAE decodes in tiles."""
    preset_gib = PRESETS.get(settings.preset or "", 0)
    weights_gib = weight_bytes * (0.5 if settings.weight_storage else 1.0) / 2**30
    offload = settings.offload
    if offload is None and preset_gib:
        offload = "group" if weights_gib + HEADROOM_GIB > preset_gib else "model" if preset_gib < 80 else "none"
    offload = offload or "none"
    vae_tiling = settings.vae_tiling if settings.vae_tiling is not None else bool(preset_gib)
    planned = replace(settings, offload=offload, vae_tiling=vae_tiling)
    if fast and planned.hooks_transformer:
        raise ValidationError("fast", f"memory={settings.preset!r} needs offload={offload!r} for a transformer "
                              f"of {weights_gib:.1f} GiB, and the fast path needs it resident.",
                              "drop fast=True for this model, or use a larger card's preset.")
    return planned


def apply_memory(pipe, settings: MemorySettings, device: str) -> dict[str, Any]:
    """Install planned ``settings`` on a loaded, unmoved pipeline; returns what was done (for provenance)."""
    import torch

    done: dict[str, Any] = {k: v for k, v in asdict(settings).items() if k != "blocks_per_group"}
    dev = torch.device(device)
    if settings.weight_storage:
        pipe.transformer.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn,
                                                  compute_dtype=pipe.transformer.dtype)
    if settings.offload == "group":
        pipe.transformer.to("cpu")
        stream = dev.type == "cuda"
        pipe.transformer.enable_group_offload(onload_device=dev, offload_device=torch.device("cpu"),
                                              offload_type="block_level",
                                              num_blocks_per_group=settings.blocks_per_group,
                                              use_stream=stream, non_blocking=stream)
        for name in ("vae", "sound_tokenizer"):
            component = getattr(pipe, name, None)
            if component is not None:
                component.to(dev)
        done["use_stream"] = stream
    elif settings.offload == "model":
        pipe.enable_model_cpu_offload(device=dev)
    else:
        pipe.to(dev)
    if settings.vae_tiling:
        pipe.vae.enable_tiling()
    return done
