"""Tiny random-weight depth and segmentation models: the real ``transformers`` classes, shrunk, built offline.

Built into ``$COSMOS_HELPERS_CACHE`` on first use, each saved with its image processor as a hub checkpoint is, so the
loading code is the real one. Their maps are noise-like but deterministic: they keep CI offline and never stand in
for a model the user names.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..models.tiny import cache_root, cached_build

TINY_FORMAT_VERSION = 1
TINY_NAME = "tiny"  # what a user writes for a control model to get the stand-in of that kind

DEPTH_BACKBONE: dict[str, Any] = dict(hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
                                      intermediate_size=32, patch_size=14, image_size=56,
                                      out_features=["stage1", "stage2", "stage3", "stage4"],
                                      reshape_hidden_states=False)
DEPTH_CONFIG: dict[str, Any] = dict(reassemble_hidden_size=16, neck_hidden_sizes=[8, 8, 8, 8], fusion_hidden_size=8,
                                    head_hidden_size=8, patch_size=14, depth_estimation_type="relative")
# Depth Anything V2's processor, at a 56 px short side instead of 518.
DEPTH_PROCESSOR: dict[str, Any] = dict(size={"height": 56, "width": 56}, keep_aspect_ratio=True, ensure_multiple_of=14,
                                       resample=3, do_rescale=True, do_normalize=True,
                                       image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225])
SEG_LABELS: tuple[str, ...] = ("wall", "floor", "sky", "tree", "road", "person", "car", "building")
SEG_CONFIG: dict[str, Any] = dict(num_encoder_blocks=4, depths=[1, 1, 1, 1], hidden_sizes=[8, 16, 16, 16],
                                  num_attention_heads=[1, 1, 1, 1], decoder_hidden_size=16)
SEG_PROCESSOR: dict[str, Any] = dict(size={"height": 64, "width": 64}, do_reduce_labels=False)


def tiny_control_model_path(kind: str, seed: int = 0, root: str | Path | None = None) -> Path:
    """The folder of the tiny ``"depth"`` or ``"seg"`` model, building it first if it is not there yet."""
    builders = {"depth": _build_depth, "seg": _build_seg}
    if kind not in builders:
        raise ValueError(f"no tiny control model of kind {kind!r}; kinds: {', '.join(builders)}")
    target = cache_root(root) / f"tiny-{kind}-v{TINY_FORMAT_VERSION}-seed{seed}"

    def write(staging: Path) -> None:
        with quiet_transformers():
            model, processor = builders[kind](seed)
        model.save_pretrained(staging)
        processor.save_pretrained(staging)

    return cached_build(target, "config.json", write)


def _build_depth(seed: int):
    import torch
    from transformers import DepthAnythingConfig, DepthAnythingForDepthEstimation, Dinov2Config
    from transformers.models.dpt.image_processing_pil_dpt import DPTImageProcessorPil
    torch.manual_seed(seed)
    config = DepthAnythingConfig(backbone_config=Dinov2Config(**DEPTH_BACKBONE), **DEPTH_CONFIG)
    return DepthAnythingForDepthEstimation(config).eval(), DPTImageProcessorPil(**DEPTH_PROCESSOR)


def _build_seg(seed: int):
    import torch
    from transformers import SegformerConfig, SegformerForSemanticSegmentation
    from transformers.models.segformer.image_processing_pil_segformer import SegformerImageProcessorPil
    torch.manual_seed(seed)
    labels = dict(enumerate(SEG_LABELS))
    config = SegformerConfig(**SEG_CONFIG, num_labels=len(labels), id2label=labels,
                             label2id={name: i for i, name in labels.items()})
    return SegformerForSemanticSegmentation(config).eval(), SegformerImageProcessorPil(**SEG_PROCESSOR)


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' loading chatter (the torchvision fallback notice, weight bars) for one block."""
    from transformers.utils import logging
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    level, bars, hub_bars = logging.get_verbosity(), logging.is_progress_bar_enabled(), not are_progress_bars_disabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    disable_progress_bars()
    try:
        yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()
        if hub_bars:
            enable_progress_bars()
