"""Transfer requests: a hint in ``extra_params`` (``edge``, ``blur``, ``depth``, ``seg``, ``wsm``) or an uploaded
``control_reference`` + ``control_type`` make a video request a transfer (cosmos3/transfer.py).

Here they are checked (the upload pairing rules of video/generation/helpers.py:636-695 with their wording; hint
fields per ``HINT_FIELDS``; ``control_weight`` finite and >= 0; presets, ``"none"`` included for edge; an
inclusive ``control_guidance_interval``), server-local control paths are allowed only under
``--allowed-local-media-path``, the uploaded control is persisted and its path injected as
``extra_params[<type>].control_path``, and the result is what the server's ``transfer_runner`` receives.
vLLM-Omni reports most hint mistakes as a 500 from inside its pipeline; the stand-in answers 400 up front.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..protocol import vllm_omni as vo
from .errors import bad_request, value_error
from .limits import ServerLimits
from .references import Reference, Uploads, check_video, local_media

PRESETS = {"preset_edge_threshold": vo.EDGE_PRESETS, "preset_blur_strength": vo.BLUR_PRESETS}


@dataclass
class TransferInputs:
    """The arguments of ``transfer_runner(form_fields, extra_params, rgb_video_path, control_paths)``."""

    form_fields: dict[str, str]
    extra_params: dict[str, Any]
    rgb_video_path: Path | None = None
    control_paths: dict[str, Path] = field(default_factory=dict)


def control_type(declared: str | None, uploaded: bool, extra: dict[str, Any]) -> str | None:
    """The pairing of ``control_reference`` and ``control_type``; the normalised type, or ``None``."""
    if not uploaded:
        if declared is not None:
            raise bad_request("control_type requires a control_reference upload.", param="control_type")
        return None
    if declared is None or not declared.strip():
        raise bad_request("control_reference requires control_type.", param="control_type")
    kind = declared.strip().lower()
    if kind not in vo.HINT_KINDS:
        raise bad_request(f"Control upload type '{kind}' is not supported by this model. Supported control upload "
                          f"types: {', '.join(sorted(vo.HINT_KINDS))}.", param="control_type")
    existing = extra.get(kind)
    if existing is not None and existing is not True and not isinstance(existing, dict):
        raise bad_request(f"extra_params.{kind} must be an object when control_reference is uploaded.")
    if isinstance(existing, dict) and any(existing.get(key) is not None for key in ("control", "control_path")):
        raise bad_request(f"Provide either control_reference or extra_params.{kind}.control/control_path, not both.")
    return kind


def hints(extra: dict[str, Any]) -> list[str]:
    """The hint kinds a request selects (a hint set to ``null`` selects nothing)."""
    return [kind for kind in vo.HINT_KINDS if extra.get(kind) is not None]


def check(extra: dict[str, Any], uploaded_kind: str | None) -> bool:
    """Validate the transfer keys of ``extra``; True when the request is a transfer."""
    selected = hints(extra)
    for kind in selected:
        _check_hint(kind, extra[kind], uploaded_kind)
    if extra.get("control_guidance_interval") is not None:
        _interval(extra["control_guidance_interval"])
    transfer = bool(selected) or uploaded_kind is not None
    stray = [key for key in vo.TRANSFER_ONLY if extra.get(key) is not None]
    if stray and not transfer:
        raise value_error(f"extra_params.{stray[0]}: Cosmos3 transfer options were provided, but no transfer hint "
                          f"was selected; add one of {', '.join(vo.HINT_KINDS)}.", param=f"extra_params.{stray[0]}")
    return transfer


def _check_hint(kind: str, value: Any, uploaded_kind: str | None) -> None:
    where = f"extra_params.{kind}"
    if value is True or isinstance(value, str):
        if value is True and kind not in ("edge", "blur") and uploaded_kind != kind:
            raise value_error(f"{where}: true computes the map from the input video, which only edge and blur "
                              "support; give a control_path or upload control_reference", param=where)
        return
    if not isinstance(value, dict):
        raise value_error(f"{where} must be true, a path string or an object, got {value!r}", param=where)
    unknown = sorted(set(value) - set(vo.HINT_FIELDS[kind]))
    if unknown:
        raise value_error(f"{where}: unsupported field(s) {', '.join(unknown)}; supported: "
                          f"{', '.join(vo.HINT_FIELDS[kind])}", param=where)
    weight = value.get("control_weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
        raise value_error(f"{where}.control_weight must be a finite number >= 0, got {weight!r}",
                          param=f"{where}.control_weight")
    for name, allowed in PRESETS.items():
        preset = value.get(name)
        if name in vo.HINT_FIELDS[kind] and preset is not None and str(preset).lower() not in allowed:
            raise value_error(f"{where}.{name} must be one of {', '.join(allowed)}, got {preset!r}",
                              param=f"{where}.{name}")
    if value.get("control_path") is not None and not isinstance(value["control_path"], str):
        raise value_error(f"{where}.control_path must be a string path", param=f"{where}.control_path")


def _interval(value: Any) -> None:
    try:
        parts = [p for p in value.split(",") if p.strip()] if isinstance(value, str) else list(value)
        lo, hi = (float(v) for v in parts)
    except (TypeError, ValueError):
        raise value_error("extra_params.control_guidance_interval must be [lo, hi] or 'lo,hi'",
                          param="extra_params.control_guidance_interval") from None
    if not lo <= hi:
        raise value_error(f"extra_params.control_guidance_interval must be ordered as [lo, hi], got {value!r}",
                          param="extra_params.control_guidance_interval")


def inputs(form_fields: dict[str, str], extra: dict[str, Any], reference: Reference | None, control: bytes | None,
           uploaded_kind: str | None, uploads: Uploads, limits: ServerLimits) -> TransferInputs:
    """Resolve local paths, persist the uploaded control and collect what the runner needs."""
    if reference is not None and reference.kind == "image":
        raise value_error("Cosmos3 transfer accepts video inputs, not images: upload the RGB video as "
                          "input_reference.", param="input_reference")
    extra = dict(extra)
    for kind in hints(extra):
        value = extra[kind]
        if isinstance(value, str):
            extra[kind] = str(local_media(value, f"extra_params.{kind}", limits))
        elif isinstance(value, dict) and value.get("control_path") is not None:
            path = local_media(value["control_path"], f"extra_params.{kind}.control_path", limits)
            extra[kind] = {**value, "control_path": str(path)}
    if control is not None and uploaded_kind is not None:
        path = uploads.write(f"control_{uploaded_kind}", control)
        check_video(path, "control_reference", limits)
        hint = extra.get(uploaded_kind)
        extra[uploaded_kind] = {**(hint if isinstance(hint, dict) else {}), "control_path": str(path)}
    paths = {}
    for kind in hints(extra):
        value = extra[kind]
        path = value if isinstance(value, str) else value.get("control_path") if isinstance(value, dict) else None
        if path is not None:
            paths[kind] = Path(path)
    return TransferInputs(form_fields=form_fields, extra_params=extra,
                          rgb_video_path=reference.video if reference is not None else None, control_paths=paths)
