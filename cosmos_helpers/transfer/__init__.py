"""Video transfer (control video -> photoreal video): the framework spec, and the control maps it needs.

Names load on first use, so ``cosmos-helpers --help`` and ``import cosmos_helpers.transfer`` stay cheap
(OpenCV and torch come in only when a control map or a transfer actually runs).
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
    "fit_to_bucket": "controls",
    "load_control": "controls",
    "mirror_pad": "controls",
    "mirror_pad_indices": "controls",
    "read_video": "controls",
    "write_video": "controls",
    "BLUR_PRESETS": "spec",
    "COMPUTABLE_HINTS": "spec",
    "CONTROL_DIRECTIVE": "spec",
    "EDGE_PRESETS": "spec",
    "FRAMEWORK_TIERS": "spec",
    "HINT_KINDS": "spec",
    "HINT_TUNED_DEFAULTS": "spec",
    "MODALITY_DEFAULTS": "spec",
    "TRANSFER_ONLY_FIELDS": "spec",
    "TRANSFER_SAMPLE_DEFAULTS": "spec",
    "Hint": "spec",
    "ResolvedHint": "spec",
    "ResolvedSpec": "spec",
    "TransferSpec": "spec",
    "check_control_consistency": "spec",
    "chunk_length": "spec",
    "control_directive": "spec",
    "format_transfer_prompt": "spec",
    "load_prompt_file": "spec",
    "load_spec": "spec",
    "plan_chunks": "spec",
    "round_up_chunk": "spec",
    "spec_json": "spec",
    "write_spec": "spec",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cosmos_helpers.transfer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
