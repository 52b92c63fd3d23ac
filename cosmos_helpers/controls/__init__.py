"""Depth and segmentation controls computed from an RGB clip with a ``transformers`` model the user names.

Names load on first use (torch and transformers come in only when a model loads).
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES: dict[str, str] = {
    "estimation": "ControlEstimator ControlMaps ControlModel color_segments depth_to_control estimate_controls "
                  "resolve_model",
    "tiny": "tiny_control_model_path",
    "videos": "control_video_path read_record write_control_videos",
}
_EXPORTS: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names.split()}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cosmos_helpers.controls' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
