"""Depth and segmentation control maps computed from RGB frames with a ``transformers`` model the user names.

The framework and vLLM-Omni compute only edge and blur; a depth or seg hint needs a control video made beforehand
(``protocol.framework.ESTIMATED_HINTS``) in the form the model was trained on: Depth Anything (V1 or V2) relative
inverse depth normalised over the whole clip (:func:`depth_to_control`); SegFormer classes, one colour each for the
whole clip (:func:`color_segments`; a panoptic model's instance splits could not keep stable colours over a clip).
The model named is the model used, nothing falls back: ``"tiny"`` is the random-weight stand-in of the same class
(:mod:`cosmos_helpers.controls.tiny`), else a folder or a hub id whose config is read first, so a model of the wrong
kind fails before any weights load. Frames and maps are numpy ``uint8`` ``[T, H, W, 3]`` RGB.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from ..errors import ValidationError
from ..progress import progress_bar
from ..protocol.framework import CONTROL_CHANNELS, ESTIMATED_HINTS, SEG_COLORS
from .tiny import TINY_NAME, quiet_transformers, tiny_control_model_path

# The transformers model classes each kind accepts (config ``model_type`` -> class name).
MODEL_TYPES: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "depth": MappingProxyType({"depth_anything": "DepthAnythingForDepthEstimation"}),
    "seg": MappingProxyType({"segformer": "SegformerForSemanticSegmentation"}),
})
# What a user names when they have the hub (printed in errors; never used unless named).
SUGGESTED_MODELS: Mapping[str, str] = MappingProxyType({
    "depth": "depth-anything/Depth-Anything-V2-Small-hf", "seg": "nvidia/segformer-b0-finetuned-ade-512-512"})
DEFAULT_BATCH = 8
MIN_SIDE = 2  # pixels: below this there is no picture to estimate anything from


@dataclass(frozen=True)
class ControlModel:
    kind: str
    name: str
    source: str  # the folder or hub id ``from_pretrained`` reads
    model_class: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "model": self.name, "source": self.source, "model_class": self.model_class}


@dataclass
class ControlMaps:
    """Control frames ``[T, H, W, 3]`` uint8 and where they came from; ``labels`` maps a seg colour to its class."""
    kind: str
    frames: np.ndarray
    model: ControlModel
    labels: dict[str, tuple[int, int, int]] = field(default_factory=dict)


def check_kind(kind: str, field_name: str = "kind") -> str:
    if kind in ESTIMATED_HINTS:
        return kind
    if kind in ("edge", "blur"):
        raise ValidationError(field_name, f"{kind} is computed from vision_path by every backend, not estimated.",
                              f'add "{kind}": {{}} to the sample without control_path.')
    raise ValidationError(field_name, f"cannot estimate {kind!r} controls.",
                          f"estimate one of {', '.join(ESTIMATED_HINTS)}.")


def resolve_model(kind: str, name: str, *, field_name: str | None = None) -> ControlModel:
    """Check that ``name`` is a ``kind`` model (reading only its config) and say where it loads from."""
    field_name = field_name or f"{kind}.model"
    check_kind(kind, field_name)
    if not isinstance(name, str) or not name.strip():
        raise ValidationError(field_name, f"no model named for {kind}.",
                              f'name one, e.g. "{SUGGESTED_MODELS[kind]}" (or "{TINY_NAME}" offline).')
    source = str(tiny_control_model_path(kind)) if name == TINY_NAME else name
    from transformers import AutoConfig
    try:
        config = AutoConfig.from_pretrained(source)
    except (OSError, ValueError) as exc:
        where = "folder" if Path(source).exists() else "hub id (is the hub reachable, the id spelled right?)"
        raise ValidationError(field_name, f"cannot read the config of {name!r} as a {where}: {exc}",
                              f'name a {kind} model, e.g. "{SUGGESTED_MODELS[kind]}".') from None
    accepted = MODEL_TYPES[kind]
    model_type = getattr(config, "model_type", None)
    if model_type not in accepted:
        raise ValidationError(field_name, f"{name!r} is a {model_type!r} model, not a {kind} model.",
                              f"name a {' or '.join(accepted.values())} checkpoint, e.g. "
                              f'"{SUGGESTED_MODELS[kind]}".')
    return ControlModel(kind=kind, name=name, source=source, model_class=accepted[model_type])


def check_frames(frames: Any, field_name: str = "frames", min_side: int = MIN_SIDE) -> np.ndarray:
    """``[T, H, W, 3]`` uint8 RGB frames (one ``[H, W, 3]`` frame becomes ``T = 1``), or a ValidationError."""
    array = np.asarray(frames)
    if array.ndim == 3:
        array = array[None]
    if array.ndim != 4 or array.shape[-1] != 3:
        raise ValidationError(field_name, f"expected RGB frames [T, H, W, 3] or one frame [H, W, 3], got shape "
                              f"{np.shape(frames)}.", "pass uint8 RGB frames (e.g. media.read_media(path).frames).")
    if array.dtype != np.uint8:
        raise ValidationError(field_name, f"expected uint8 frames, got {array.dtype}.",
                              "convert with np.clip(x, 0, 255).astype(np.uint8).")
    if array.shape[0] == 0:
        raise ValidationError(field_name, "the clip has no frames.", "pass a clip with at least one frame.")
    if min(array.shape[1:3]) < min_side:
        raise ValidationError(field_name, f"frames of {array.shape[2]}x{array.shape[1]} are too small.",
                              f"pass frames at least {min_side}x{min_side} (the bucket's size, typically).")
    return array


def pick_device(device: str | None = None) -> str:
    import torch
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ValidationError("device", f"{device} was asked for, but torch sees no CUDA device.",
                              'use device="cpu" or None (CUDA when there is one).')
    return str(device)


class ControlEstimator:
    """A loaded depth or seg model; call it on frames. Load once, run on many clips."""

    def __init__(self, kind: str, model: str | ControlModel, *, device: str | None = None) -> None:
        self.spec = model if isinstance(model, ControlModel) else resolve_model(kind, model)
        if self.spec.kind != kind:
            raise ValidationError(f"{kind}.model", f"{self.spec.name!r} is a {self.spec.kind} model.",
                                  f"name a {kind} model.")
        self.kind, self.device = kind, pick_device(device)
        import transformers
        with quiet_transformers():
            self.processor = transformers.AutoImageProcessor.from_pretrained(self.spec.source)
            model_class = getattr(transformers, self.spec.model_class)
            self.model = model_class.from_pretrained(self.spec.source).to(self.device).eval()

    def __repr__(self) -> str:
        return f"ControlEstimator({self.kind!r}, {self.spec.name!r}, device={self.device!r})"

    def __call__(self, frames: Any, *, batch_size: int = DEFAULT_BATCH, progress: bool = True) -> ControlMaps:
        array = check_frames(frames)
        if int(batch_size) < 1:
            raise ValidationError("batch_size", f"must be >= 1, got {batch_size}.", f"use e.g. {DEFAULT_BATCH}.")
        raw = self._predict(array, int(batch_size), progress)
        if self.kind == "depth":
            return ControlMaps("depth", depth_to_control(raw, self.model.config), self.spec)
        control, labels = color_segments(raw, self.model.config.id2label)
        return ControlMaps("seg", control, self.spec, labels)

    def _predict(self, frames: np.ndarray, batch_size: int, progress: bool) -> np.ndarray:
        """Per frame: depth ``[T, H, W]`` float32 or class ids ``[T, H, W]`` int32, at the frame's size."""
        import torch
        import torch.nn.functional as F
        height, width = frames.shape[1:3]
        depth = self.kind == "depth"
        out = np.empty(frames.shape[:3], dtype=np.float32 if depth else np.int32)
        with progress_bar(total=len(frames), desc=f"{self.kind} ({self.spec.name})", unit="frame",
                          enabled=progress) as bar:
            for start in range(0, len(frames), batch_size):
                batch = frames[start:start + batch_size]
                inputs = self.processor(images=list(batch), return_tensors="pt").to(self.device)
                with torch.inference_mode():
                    output = self.model(**inputs)
                for i in range(len(batch)):  # one frame at a time: 150 classes x 720p would not fit as a batch
                    pred = output.predicted_depth[i][None, None] if depth else output.logits[i][None]
                    pred = F.interpolate(pred.float(), size=(height, width), mode="bicubic" if depth else "bilinear",
                                         align_corners=False)[0]
                    out[start + i] = (pred[0] if depth else pred.argmax(0)).cpu().numpy()
                bar.update(len(batch))
        return out


def depth_to_control(depth: np.ndarray, config: Any = None) -> np.ndarray:
    """Predicted depth ``[T, H, W]`` -> grey uint8 ``[T, H, W, 3]``: inverse depth, min-max over the clip. Relative
    Depth Anything already predicts inverse depth (near is large); a metric checkpoint predicts metres, which are
    inverted first. A clip of one constant depth is mid-grey (there is no near or far to show)."""
    values = np.asarray(depth, dtype=np.float64)
    if getattr(config, "depth_estimation_type", "relative") == "metric":
        values = 1.0 / np.maximum(values, 1e-6)
    lo, hi = float(values.min()), float(values.max())
    scaled = np.full(values.shape, 0.5) if hi - lo < 1e-12 else (values - lo) / (hi - lo)
    grey = np.round(scaled * 255.0).astype(np.uint8)
    return np.repeat(grey[..., None], CONTROL_CHANNELS, axis=-1)


def color_segments(labels: np.ndarray, id2label: Mapping[Any, str] | None = None
                   ) -> tuple[np.ndarray, dict[str, tuple[int, int, int]]]:
    """Class ids ``[T, H, W]`` -> colour uint8 ``[T, H, W, 3]`` and ``{class name: colour}``, largest first. Colours
    follow ``protocol.framework.SEG_COLORS`` in order of each class's pixel count over the whole clip (ties: lower id
    first) and repeat after 23 classes, as the framework's fixed colour list does."""
    ids = np.asarray(labels).astype(np.int64)
    present, counts = np.unique(ids, return_counts=True)
    order = present[np.lexsort((present, -counts))]
    colors = np.asarray(SEG_COLORS, dtype=np.uint8)[np.arange(len(order)) % len(SEG_COLORS)]
    lookup = np.zeros((int(ids.max()) + 1, 3), dtype=np.uint8)
    lookup[order] = colors
    names = {int(k): str(v) for k, v in (id2label or {}).items()}
    return lookup[ids], {names.get(int(class_id), f"class {int(class_id)}"): tuple(color.tolist())
                         for class_id, color in zip(order, colors)}


def estimate_controls(frames: Any, models: Mapping[str, str], *, device: str | None = None,
                      batch_size: int = DEFAULT_BATCH, progress: bool = True) -> dict[str, ControlMaps]:
    """``{kind: ControlMaps}`` for each ``kind -> model`` of ``models`` (e.g. ``{"depth": "tiny", "seg": "tiny"}``).
    Every model is checked before any is loaded, so a wrong name fails in seconds."""
    array = check_frames(frames)
    specs = {kind: resolve_model(kind, name) for kind, name in check_models(models).items()}
    return {kind: ControlEstimator(kind, spec, device=device)(array, batch_size=batch_size, progress=progress)
            for kind, spec in specs.items()}


def check_models(models: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(models, Mapping) or not models:
        raise ValidationError("compute_controls", f"expected {{kind: model}}, got {models!r}.",
                              '''pass e.g. {"depth": "tiny", "seg": "tiny"}.''')
    for kind in models:
        check_kind(kind, "compute_controls")
    return dict(models)
