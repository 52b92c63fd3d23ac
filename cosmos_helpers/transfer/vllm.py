"""Transfer over the vLLM-Omni HTTP protocol (protocol reference §4 and §7.2), both sides.

* Client: :func:`spec_to_vllm_form` turns a framework spec into the multipart request of ``POST /v1/videos(/sync)``:
  the RGB clip as ``input_reference``, the first control file as ``control_reference`` + ``control_type``, every
  hint as an ``extra_params`` block (``control_weight``, presets; ``true`` = compute from the RGB clip; further
  files as server-local ``control_path``), ``guidance_scale`` / ``flow_shift`` / ``num_inference_steps`` / ``seed``
  / ``fps`` as form fields, and ``num_frames`` >= the control length (an omitted ``num_frames`` becomes 1 and
  would cap the transfer at one frame).
* Server: :func:`server_transfer_runner` implements the local server's ``transfer_runner`` hook by rebuilding a
  framework spec from the form and running :func:`~cosmos_helpers.transfer.diffusers_transfer.run_transfer`.

vLLM-Omni differences kept on purpose (so the local server answers like the real one): ``num_frames`` caps the
length; the bucket's aspect comes from the RGB input (else the first control), not from a spec field; guidance
intervals arrive inclusive ``[lo, hi]`` and are widened by one timestep each side here so the framework-style
strict test keeps the same steps.
"""

from __future__ import annotations

import json
import math
import os
from functools import partial
from pathlib import Path
from typing import Any

from cosmos_helpers.errors import ValidationError
from cosmos_helpers.result import Generation
from cosmos_helpers.transfer.spec import HINT_KINDS, PRESET_FIELDS, TransferSpec, load_spec

# extra_params keys that map 1:1 onto spec fields
_PASSTHROUGH = (
    "control_guidance", "num_video_frames_per_chunk", "num_conditional_frames", "num_first_chunk_conditional_frames",
    "max_frames", "share_vision_temporal_positions", "emphasize_control_in_prompt", "show_input",
    "show_control_condition", "negative_metadata_mode",
)


def _num(value: float) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def _control_length(path: str) -> int:
    from cosmos_helpers.transfer.controls import read_video

    return int(read_video(path)[0].shape[0])


def spec_to_vllm_form(spec: TransferSpec | str | os.PathLike[str], *, profile: str | None = None
                      ) -> tuple[dict[str, str], dict[str, tuple[str, bytes, str]]]:
    """``(fields, files)`` of the multipart transfer request for ``spec`` (every value a string, per §4).

    ``files`` maps form name -> ``(filename, bytes, content type)``: ``input_reference`` (the RGB clip, when the
    spec has ``vision_path``) and ``control_reference`` (the first hint with a ``control_path``). Hints after
    the uploaded one keep their ``control_path`` as a server-local path (the protocol allows one upload).
    ``profile="tiny"`` adds ``resolution: "128"`` for the local server's CPU tier.
    """
    if not isinstance(spec, TransferSpec):
        spec = load_spec(spec)
    spec.validate(tiers=("128", "256", "480", "720", "768"))
    r = spec.resolved()
    if not r.is_transfer:
        raise ValidationError("spec", "no control hint: this is not a transfer spec.", "add edge/blur/depth/seg/wsm.")
    files: dict[str, tuple[str, bytes, str]] = {}
    extra: dict[str, Any] = {}
    fields: dict[str, str] = {"prompt": r.prompt}
    if r.negative_prompt is not None:
        fields["negative_prompt"] = r.negative_prompt
    if r.vision_path is not None:
        files["input_reference"] = (Path(r.vision_path).name, Path(r.vision_path).read_bytes(), "video/mp4")
    uploaded = None
    length = None
    for hint in r.hints:
        block: dict[str, Any] = {}
        if hint.control_path is not None:
            if uploaded is None:
                uploaded = hint.kind
                files["control_reference"] = (Path(hint.control_path).name, Path(hint.control_path).read_bytes(),
                                              "video/mp4")
                fields["control_type"] = hint.kind
            else:
                block["control_path"] = hint.control_path
            if length is None:
                length = _control_length(hint.control_path)
        if spec.hints[hint.kind].weight is not None:
            block["control_weight"] = float(hint.weight)
        if hint.kind in PRESET_FIELDS and spec.hints[hint.kind].preset is not None:
            block[PRESET_FIELDS[hint.kind]] = hint.preset
        extra[hint.kind] = block if block else True
    if length is None and r.vision_path is not None:
        length = _control_length(r.vision_path)
    length = min(length or r.num_frames, r.max_frames or 5000)
    # an omitted num_frames becomes 1 and caps the transfer: always send >= the control length (4k+1)
    fields["num_frames"] = str(max(1, math.ceil((length - 1) / 4) * 4 + 1))
    fields["fps"] = _num(r.fps)
    fields["num_inference_steps"] = str(r.num_steps)
    fields["guidance_scale"] = _num(r.guidance)
    fields["flow_shift"] = _num(r.shift)
    if r.seed is not None:
        fields["seed"] = str(r.seed)
    extra["guidance"] = r.guidance
    extra["shift"] = r.shift
    extra["fps"] = r.fps
    for key in _PASSTHROUGH:
        value = getattr(r, key)
        if value is not None and (spec.to_dict().get(key) is not None or key in (
                "control_guidance", "num_video_frames_per_chunk", "num_conditional_frames")):
            extra[key] = value
    for key in ("guidance_interval", "control_guidance_interval"):
        value = getattr(r, key)
        if value is not None:  # framework strict (lo, hi) -> vLLM inclusive [lo + 1, hi - 1] on integer timesteps
            extra[key] = [value[0] + 1, value[1] - 1]
    extra["resolution"] = "128" if profile == "tiny" else r.resolution
    extra["use_system_prompt"] = True
    fields["extra_params"] = json.dumps(extra)
    return fields, files


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "t", "y")
    return bool(value)


def form_to_spec(form_fields: dict, extra_params: dict, rgb_video_path: Path | None,
                 control_paths: dict[str, Path], *, base_dir: str | os.PathLike[str] | None = None) -> TransferSpec:
    """Rebuild the framework spec a vLLM-Omni transfer request describes (the inverse of :func:`spec_to_vllm_form`)."""
    from cosmos_helpers.presets import nearest_aspect
    from cosmos_helpers.transfer.controls import read_video

    extra = dict(extra_params)
    data: dict[str, Any] = {"name": "vllm_transfer", "model_mode": "video2video",
                            "prompt": form_fields.get("prompt") or ""}
    if form_fields.get("negative_prompt"):
        data["negative_prompt"] = form_fields["negative_prompt"]
    if rgb_video_path is not None:
        data["vision_path"] = str(rgb_video_path)
    for kind in HINT_KINDS:
        if kind not in extra:
            continue
        value = extra[kind]
        hint: dict[str, Any] = {}
        if isinstance(value, str):
            hint["control_path"] = value
        elif isinstance(value, dict):
            if "control_weight" in value:
                hint["weight"] = float(value["control_weight"])
            if kind in PRESET_FIELDS and PRESET_FIELDS[kind] in value:
                hint[PRESET_FIELDS[kind]] = value[PRESET_FIELDS[kind]]
            if value.get("control_path"):
                hint["control_path"] = str(value["control_path"])
        if kind in control_paths:
            hint["control_path"] = str(control_paths[kind])
        data[kind] = hint

    def pick(*names: str, source: dict | None = None) -> Any:
        for name in names:
            for where in ((source,) if source is not None else (extra, form_fields)):
                if where.get(name) not in (None, ""):
                    return where[name]
        return None

    guidance = pick("guidance", "guidance_scale")
    shift = pick("shift", "flow_shift")
    fps = pick("fps")
    if guidance is not None:
        data["guidance"] = float(guidance)
    if shift is not None:
        data["shift"] = float(shift)
    if fps is not None:
        data["fps"] = int(round(float(fps)))
    if form_fields.get("num_inference_steps"):
        data["num_steps"] = int(form_fields["num_inference_steps"])
    if form_fields.get("seed"):
        data["seed"] = int(form_fields["seed"])
    for key in _PASSTHROUGH:
        if key in extra:
            value = extra[key]
            if key in ("share_vision_temporal_positions", "emphasize_control_in_prompt", "show_input",
                       "show_control_condition"):
                value = _bool(value)
            elif key == "control_guidance":
                value = float(value)
            elif key != "negative_metadata_mode":
                value = int(value)
            data[key] = value
    for key in ("guidance_interval", "control_guidance_interval"):
        if extra.get(key) is not None:
            value = extra[key]
            lo, hi = (float(v) for v in (value.split(",") if isinstance(value, str) else value))
            data[key] = [lo - 1, hi + 1]  # inclusive [lo, hi] -> strict (lo - 1, hi + 1)
    tier = pick("resolution", "image_size", source=extra)
    if tier is not None:
        data["resolution"] = str(tier)
    num_frames = form_fields.get("num_frames")
    if num_frames:  # vLLM-Omni: num_frames caps the transfer length
        data["max_frames"] = min(int(num_frames), int(data.get("max_frames", 5000)))
        data["num_frames"] = int(num_frames)
    geometry_source = rgb_video_path or next((Path(p) for p in control_paths.values()), None)
    if geometry_source is not None:  # vLLM-Omni picks the bucket from the input's own aspect
        frame = read_video(geometry_source, max_frames=1)[0]
        data["aspect_ratio"] = nearest_aspect(int(frame.shape[2]), int(frame.shape[1]))
    return TransferSpec.from_dict(data, base_dir=base_dir or Path.cwd())


def server_transfer_runner(form_fields: dict, extra_params: dict, rgb_video_path: Path | None,
                           control_paths: dict[str, Path], *, profile: str | None = "tiny",
                           model: str | None = None) -> Generation:
    """The local server's ``transfer_runner`` hook: the request's spec, run with the diffusers transfer."""
    from cosmos_helpers.transfer.diffusers_transfer import run_transfer

    spec = form_to_spec(form_fields, extra_params, rgb_video_path, control_paths)
    return run_transfer(spec, profile=profile, model=model, progress=False)


def make_transfer_runner(profile: str | None = "tiny", model: str | None = None):
    """A ``transfer_runner`` bound to the server's profile and model (for ``create_app(transfer_runner=...)``)."""
    return partial(server_transfer_runner, profile=profile, model=model)


__all__ = ["form_to_spec", "make_transfer_runner", "server_transfer_runner", "spec_to_vllm_form"]
