"""Video transfer (control video -> photoreal video) and running framework input samples on any backend.

Names load on first use, so ``cosmos-helpers --help`` and ``import cosmos_helpers.transfer`` stay cheap (OpenCV
and torch come in only when a control map or a transfer actually runs). Reading input files lives in
:mod:`cosmos_helpers.specs`; reading and writing media in :mod:`cosmos_helpers.media`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "BLUR_FACTORS": "controls",
    "EDGE_THRESHOLDS": "controls",
    "BlurParameters": "controls",
    "blur_map": "controls",
    "blur_parameters": "controls",
    "bucket_for": "controls",
    "compute_control": "controls",
    "edge_map": "controls",
    "load_control": "controls",
    "mirror_pad": "controls",
    "mirror_pad_indices": "controls",
    "check_control_consistency": "plan",
    "chunk_length": "plan",
    "control_directive": "plan",
    "format_transfer_prompt": "plan",
    "plan_chunks": "plan",
    "PreparedTransfer": "prepare",
    "prepare_transfer": "prepare",
    "TransferGeneration": "diffusers_transfer",
    "run_transfer": "diffusers_transfer",
    "SpecRunner": "runner",
    "run_spec": "runner",
    "make_transfer_runner": "vllm",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cosmos_helpers.transfer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
