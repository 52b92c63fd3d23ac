"""Video transfer (control video -> photoreal video) and running framework input samples on any backend.

Names load on first use, so ``cosmos-helpers --help`` and ``import cosmos_helpers.transfer`` stay cheap (OpenCV
and torch come in only when a control map or a transfer actually runs). Reading input files lives in
:mod:`cosmos_helpers.specs`; reading and writing media in :mod:`cosmos_helpers.media`.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES: dict[str, str] = {  # relative to this package: ".x" is cosmos_helpers.x
    ".controls.maps": "BlurParameters blur_map blur_parameters compute_control edge_map",
    ".specs.transfer": "bucket_for load_control mirror_pad mirror_pad_indices PreparedTransfer "
                       "check_control_consistency chunk_length control_directive format_transfer_prompt plan_chunks "
                       "prepare_transfer",
    ".backends.diffusers.transfer": "TransferGeneration run_transfer",
    "runner": "SpecRunner run_spec",
    ".standins.vllm_omni.transfer": "make_transfer_runner",
}
_EXPORTS: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names.split()}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cosmos_helpers.transfer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
