"""A framework transfer sample as vLLM-Omni 0.30.0's transfer form, refused first where vLLM-Omni would reject it or
run it otherwise (the local server's side is :mod:`cosmos_helpers.standins.vllm_omni.transfer`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import media
from ..errors import ValidationError
from ..protocol import framework as fw
from ..protocol import vllm_omni as vo
from ..specs.resolve import ResolvedHint, ResolvedSample
from .vllm_wire import BACKEND_NAME as BACKEND

Files = dict[str, tuple[str, bytes, str]]


def check_transfer(r: ResolvedSample, given: set[str], *, server_paths: bool = False) -> None:
    def refuse(field: str, problem: str, fix: str) -> None:
        raise ValidationError(field, f"{BACKEND} {vo.VERSION}: {problem}", fix)

    if r.resolution not in vo.TIERS:
        refuse("resolution", f"knows the tiers {', '.join(vo.TIERS)} only, not {r.resolution!r} (it answers "
               "\"Unknown Cosmos3 resolution\").", f"set resolution (or --resolution) to one of {', '.join(vo.TIERS)}; "
               "profile 'tiny' uses this project's CPU tier 128, which only diffusers runs.")
    if r.vision_path is not None and Path(r.vision_path).suffix.lower() not in fw.VIDEO_EXTENSIONS:
        refuse("vision_path", "transfer takes a video input, not an image.",
               "give an .mp4 vision_path, or run image transfer on diffusers or the framework.")
    if "guidance_interval" in given:
        refuse("guidance_interval", "does not apply guidance_interval to transfer (pipeline_cosmos3.py:3613).",
               "remove guidance_interval, use control_guidance_interval, or run on diffusers or the framework.")
    for name in ("normalize_cfg", "duration_template", "resolution_template", "inverse_duration_template",
                 "inverse_resolution_template", "video_save_quality", "sigma_max"):
        if name in given:
            refuse(name, f"has no transfer option for {name}.", f"remove {name}, or run on diffusers or the framework.")
    source = r.vision_path or next((h.control_path for h in r.hints if h.control_path is not None), None)
    if "aspect_ratio" in given and source is not None and r.resolution in vo.TIERS:
        shape = media.probe_video(source)
        size = vo.closest_bucket(shape["width"], shape["height"], r.resolution)
        picked = next(a for a, bucket in vo.SIZES[r.resolution].items() if bucket == size)
        if picked != r.aspect_ratio:
            refuse("aspect_ratio", f"takes the bucket nearest its input's shape ({shape['width']}x{shape['height']}: "
                   f"{picked}), not the sample's aspect_ratio {r.aspect_ratio}.", "remove aspect_ratio (or give an "
                   "input of that shape), or run on diffusers or the framework.")
    uploads = [h.kind for h in r.hints if h.control_path is not None]
    if len(uploads) > 1 and not server_paths:
        refuse(f"{uploads[1]}.control_path", f"uploads one control per request ({uploads[0]} here); the others must "
               "be paths on the server.", "compute that hint from vision_path (edge/blur), run on diffusers or the "
               "framework, or pass server_paths=True when the server shares this filesystem.")


def transfer_form(r: ResolvedSample, given: set[str], *, server_paths: bool = False) -> tuple[dict[str, str], Files]:
    """``(fields, files)`` of the transfer request: the RGB clip is ``input_reference``, the first precomputed control
    ``control_reference``, every hint an ``extra_params`` block; only the ``given`` fields and what keeps the
    framework's meaning are sent (the server's defaults are the framework's). No ``fps`` field: ``extra_params.fps``
    is the framework's output fps, the input's, else the sample's."""
    check_transfer(r, given, server_paths=server_paths)
    files: Files = {}
    fields: dict[str, str] = {"prompt": r.prompt, "num_inference_steps": str(r.num_steps), "seed": str(r.seed)}
    if "negative_prompt" in given and r.negative_prompt is not None:
        fields["negative_prompt"] = r.negative_prompt
    rgb_fps = None
    if r.vision_path is not None:
        files["input_reference"] = (Path(r.vision_path).name, Path(r.vision_path).read_bytes(), "video/mp4")
        rgb_fps = media.probe_video(r.vision_path)["fps"]
    extra: dict[str, Any] = {}
    length = None
    for hint in r.hints:
        extra[hint.kind] = _hint_block(hint, given, uploaded="control_reference" in files)
        if hint.control_path is not None and "control_reference" not in files:
            files["control_reference"] = (Path(hint.control_path).name, Path(hint.control_path).read_bytes(),
                                          "video/mp4")
            fields["control_type"] = hint.kind
        if length is None:
            source = hint.control_path or r.vision_path
            length = int(media.read_media(source, max_frames=r.max_frames, field=f"{hint.kind}.control_path")
                         .frames.shape[0])
    fields["num_frames"] = str(vo.round_up_frames(length))  # a cap on the server: never shorter than the control
    extra.update(guardrails=r.guardrails, resolution=r.resolution, guidance=r.guidance, shift=r.shift,
                 control_guidance=r.control_guidance,
                 fps=float(rgb_fps or r.fps), negative_metadata_mode=r.negative_metadata_mode,
                 num_video_frames_per_chunk=r.num_video_frames_per_chunk,
                 num_conditional_frames=r.num_conditional_frames)
    for key in ("max_frames", "num_first_chunk_conditional_frames", "share_vision_temporal_positions",
                "emphasize_control_in_prompt", "show_control_condition", "show_input"):
        if key in given:
            extra[key] = getattr(r, key)
    if r.control_guidance_interval is not None:
        extra["control_guidance_interval"] = list(fw.to_inclusive(r.control_guidance_interval))
    fields["extra_params"] = json.dumps(extra)
    return fields, files


def _hint_block(hint: ResolvedHint, given: set[str], *, uploaded: bool) -> Any:
    block: dict[str, Any] = {}
    if hint.control_path is not None and uploaded:
        block["control_path"] = hint.control_path  # a second precomputed control: a path on the server
    if f"{hint.kind}.weight" in given:
        block["control_weight"] = hint.weight
    preset = fw.PRESET_FIELDS.get(hint.kind)
    if preset and f"{hint.kind}.{preset}" in given:
        block[preset] = hint.preset
    return block or True
