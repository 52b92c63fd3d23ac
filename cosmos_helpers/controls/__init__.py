"""Depth and segmentation controls computed from an RGB clip with a ``transformers`` model the user names (names
load on first use: torch and transformers come in only when a model loads)."""

from __future__ import annotations

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".estimation": "ControlEstimator ControlMaps ControlModel color_segments depth_to_control estimate_controls "
                   "resolve_model",
    ".tiny": "tiny_control_model_path",
    ".videos": "control_video_path read_record write_control_videos",
})
