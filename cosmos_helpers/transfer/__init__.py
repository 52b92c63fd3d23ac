"""Video transfer (control video -> photoreal video) and running framework input samples on any backend, with the
names a transfer notebook uses from :mod:`cosmos_helpers.specs`, ``.media`` and ``.controls``; all load on first use,
so ``cosmos-helpers --help`` stays cheap (OpenCV and torch come in only when a control map or a transfer runs)."""

from __future__ import annotations

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "..controls.maps": "BlurParameters blur_map blur_parameters compute_control edge_map",
    "..specs.transfer": "bucket_for load_control mirror_pad mirror_pad_indices PreparedTransfer "
                        "check_control_consistency chunk_length control_directive format_transfer_prompt plan_chunks "
                        "prepare_transfer",
    "..backends.diffusers.transfer": "TransferGeneration run_transfer",
    ".runner": "SpecRunner run_spec",
    "..standins.vllm_omni.transfer": "make_transfer_runner",
    "..controls.estimation": "estimate_controls",
    "..media": "fit_to_bucket read_video",
})
