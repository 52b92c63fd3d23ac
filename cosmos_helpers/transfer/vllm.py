"""vLLM-Omni 0.30.0 transfer, both sides: the request a framework transfer sample becomes, and the local stand-in
server's hook that runs such a request on diffusers.

vLLM-Omni's transfer (``diffusion/models/cosmos3/``) differs from the framework's:

* the bucket is the one nearest the RGB input's shape (else the first control's) at ``extra_params.resolution``
  (default 720; tiers 256/480/704/720 only), by ``protocol.vllm_omni.closest_bucket``;
* the model runs at the input video's fps, else ``extra_params.fps``, else the request's ``fps``, else 24 (one wsm
  hint: ``extra_params.fps`` first; pipeline_cosmos3.py:3465-3471), and a request ``fps`` re-times the encoded MP4
  (``serving_video.py:499``);
* the request's ``num_frames`` caps the length (omitted, it is 1); ``guidance_interval`` is not applied to
  transfer; intervals are inclusive ``[lo, hi]`` (``protocol.framework.to_inclusive`` / ``to_strict`` convert the
  framework's strict ``(lo, hi)``, holding the same timesteps);
* the inputs are videos only; one control file is uploaded per request (others must be paths on the server);
* a single hint gets its tuned defaults; every other key its ``protocol.vllm_omni.TRANSFER_EXTRA`` default.

Client side (:func:`transfer_form`, sent with ``VllmOmniBackend.send_video_form``): the RGB clip is
``input_reference``, the first precomputed control ``control_reference`` + ``control_type``, every hint an
``extra_params`` block; no ``fps`` field is sent (``extra_params.fps`` is the framework's output fps: the input's,
else the sample's) and ``num_frames`` is the first control's length, so the server runs what the framework would.

Server side (:func:`make_transfer_runner`): the transfer a request describes, rebuilt with vLLM-Omni's semantics;
guardrails run when the server runs them (``guardrails=`` of the factory) and the request does not turn them off.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .. import media
from ..errors import ValidationError
from ..presets import model_for
from ..protocol import framework as fw
from ..protocol import vllm_omni as vo
from ..result import Generation
from ..specs.resolve import ResolvedHint, ResolvedSample

TransferRunner = Callable[[dict, dict, "Path | None", dict], Generation]
Files = dict[str, tuple[str, bytes, str]]
BACKEND = "vllm-omni"


def check_transfer(r: ResolvedSample, given: set[str], *, server_paths: bool = False) -> None:
    """Refuse, before anything is sent, what vLLM-Omni would reject or run differently than the sample says."""
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
    """``(fields, files)`` of the multipart transfer request for a resolved sample with local media paths.

    ``given`` are the fields the input file (or the command line) set: only those, and what is needed to keep the
    framework's meaning, are sent; the rest is left to the server's defaults, which equal the framework's.
    """
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


def make_transfer_runner(model: str | None = None, *, backend: Any = None, guardrails: bool = False,
                         step_cache: Any = None) -> TransferRunner:
    """The local server's ``transfer_runner``: ``runner(form_fields, extra_params, rgb_video_path, control_paths)``.

    It runs the transfer the request describes, with vLLM-Omni's semantics (module docstring), on diffusers with
    ``model`` (default: the default profile's) and ``backend`` (a ``DiffusersBackend`` for device and dtype;
    default ``DiffusersBackend()``). ``guardrails`` is the server's own switch, as vLLM-Omni's ``--no-guardrails``:
    off, no request turns them on. ``step_cache`` is the server's (``--cache-backend``), as for every request.
    """
    model = model_for(model=model)

    def runner(form_fields: dict[str, str], extra_params: dict, rgb_video_path: Path | None,
               control_paths: dict[str, Path]) -> Generation:
        from .diffusers_transfer import run_transfer
        from .prepare import prepare_transfer

        r, aspect, fps = vllm_transfer(form_fields, extra_params, rgb_video_path, control_paths, model=model,
                                       guardrails=guardrails)
        prepared = prepare_transfer(r, aspect_ratio=aspect, fps=fps, emit_warnings=False)
        return run_transfer(prepared, backend=backend, progress=False, step_cache=step_cache)

    return runner


def vllm_transfer(form: Mapping[str, str], extra: Mapping[str, Any], rgb_video_path: Path | None,
                  control_paths: Mapping[str, Path], *, model: str | None = None, guardrails: bool = False
                  ) -> tuple[ResolvedSample, str, float]:
    """``(resolved sample, bucket aspect, model fps)`` of a vLLM-Omni transfer request, by vLLM-Omni's rules."""
    hints = _server_hints(extra, control_paths)
    if not hints:
        raise ValidationError("extra_params", "no control hint in the transfer request.",
                              "add edge/blur/depth/seg/wsm.")
    tuned = dict(vo.HINT_TUNED_DEFAULTS[hints[0].kind]) if len(hints) == 1 else {}
    x = _Extra(extra, form, tuned)
    source = rgb_video_path or next((Path(p) for p in control_paths.values()), None) or next(
        Path(h.control_path) for h in hints if h.control_path)
    probe = media.read_media(source, max_frames=1, field="input_reference")  # the RGB input, else the first control
    tier, aspect = _bucket(x, probe.frames[0])
    input_fps = float(probe.fps or fw.IMAGE_FPS) if rgb_video_path is not None else None
    fps = _model_fps(form, extra, input_fps, tuned, wsm_only=[h.kind for h in hints] == ["wsm"])
    cap = int(form.get("num_frames") or vo.VIDEO_DEFAULTS["num_frames"])
    interval = x.get("control_guidance_interval")
    if isinstance(interval, str):
        interval = [float(v) for v in interval.split(",")]
    templates = {key: x.flag(f"use_{key}_template") for key in ("duration", "resolution")}
    r = ResolvedSample(
        name="vllm_transfer", model=model_for(model=model), profile=None, model_mode="video2video",
        prompt=form.get("prompt") or "", negative_prompt=form.get("negative_prompt") or None,
        vision_path=str(rgb_video_path) if rgb_video_path else None, sound_path=None, resolution=tier,
        aspect_ratio=aspect, fps=round(fps), num_frames=cap,
        num_steps=int(form.get("num_inference_steps") or vo.VIDEO_DEFAULTS["num_inference_steps"]),
        guidance=float(x.get("guidance_scale", "guidance", form_key="guidance_scale")
                       or vo.VIDEO_DEFAULTS["guidance_scale"]),
        guidance_interval=None,  # not applied to transfer (pipeline_cosmos3.py:3613-3629)
        shift=float(x.get("flow_shift", "shift", form_key="flow_shift") or vo.VIDEO_DEFAULTS["flow_shift"]),
        normalize_cfg=False, seed=int(form["seed"]) if form.get("seed") else secrets.randbelow(vo.VIDEO_SEED_MAX + 1),
        duration_template=fw.PROMPT_DEFAULTS["duration_template"] if templates["duration"] else None,
        resolution_template=fw.RESOLUTION_TEMPLATES["video"] if templates["resolution"] else None,
        **{key: fw.PROMPT_DEFAULTS[key] for key in ("sigma_max", "inverse_duration_template",  # no such options
                                                    "inverse_resolution_template", "video_save_quality",
                                                    "image_save_quality")},
        negative_metadata_mode=str(x.get("negative_metadata_mode")), negative_prompt_keep_metadata=False,
        enable_sound=False, condition_frame_indexes_vision=(), condition_video_keep="first", num_outputs=1,
        control_guidance=float(x.get("control_guidance")),
        control_guidance_interval=None if interval is None else fw.to_strict(interval),
        hints=hints, num_video_frames_per_chunk=int(x.get("num_video_frames_per_chunk")),
        num_conditional_frames=int(x.get("num_conditional_frames")),
        num_first_chunk_conditional_frames=int(x.get("num_first_chunk_conditional_frames")),
        max_frames=min(cap, int(x.get("max_frames"))),
        share_vision_temporal_positions=x.flag("share_vision_temporal_positions"),
        emphasize_control_in_prompt=x.flag("emphasize_control_in_prompt"),
        show_control_condition=x.flag("show_control_condition"), show_input=x.flag("show_input"),
        guardrails=guardrails and x.flag("guardrails", default=vo.GENERATION_EXTRA["guardrails"]),
        sources={}, notes=())
    return r, aspect, fps


class _Extra:
    """``extra_params`` read as vLLM-Omni reads them: the first key given, else the single hint's tuned default,
    else the pipeline's default (``protocol.vllm_omni.TRANSFER_EXTRA``)."""

    def __init__(self, extra: Mapping[str, Any], form: Mapping[str, str], tuned: Mapping[str, Any]) -> None:
        self.extra, self.form, self.tuned = extra, form, tuned

    def get(self, *names: str, form_key: str | None = None) -> Any:
        for name in names:
            if self.extra.get(name) not in (None, ""):
                return self.extra[name]
        if form_key is not None and self.form.get(form_key) not in (None, ""):
            return self.form[form_key]
        for name in names:
            if name in self.tuned:
                return self.tuned[name]
        return vo.TRANSFER_EXTRA.get(names[0])

    def flag(self, name: str, *, default: bool | None = None) -> bool:
        value = self.extra.get(name)
        if value is None:
            return bool(vo.TRANSFER_EXTRA[name] if default is None else default)
        if isinstance(value, str):
            return value.strip().lower() in ("1", "true", "yes", "on")
        return bool(value)


def _bucket(x: _Extra, probe: np.ndarray) -> tuple[str, str]:
    """``(tier, aspect)``: the bucket at ``resolution`` nearest the shape of the ``probe`` frame."""
    tier = str(x.get("resolution", "image_size"))
    if tier not in vo.TIERS:
        raise ValidationError("extra_params.resolution", f"Unknown Cosmos3 transfer resolution {tier!r}.",
                              f"use one of {', '.join(vo.TIERS)}.")
    width, height = vo.closest_bucket(probe.shape[1], probe.shape[0], tier)
    return tier, next(a for a, size in vo.SIZES[tier].items() if size == (width, height))


def _server_hints(extra: Mapping[str, Any], control_paths: Mapping[str, Path]) -> tuple[ResolvedHint, ...]:
    """The hints of a request; a preset left out is ``medium`` there too (cosmos3/transfer.py:268-269)."""
    hints = []
    for kind in fw.HINT_KINDS:
        raw = extra.get(kind)
        if raw is None and kind not in control_paths:
            continue
        raw = {} if raw is True or raw is None else {"control_path": str(raw)} if isinstance(raw, str) else dict(raw)
        path = str(control_paths[kind]) if kind in control_paths else raw.get("control_path")
        preset = fw.PRESET_FIELDS.get(kind)
        hints.append(ResolvedHint(kind=kind, control_path=path, weight=float(raw.get("control_weight", 1.0)),
                                  preset=str(raw.get(preset) or fw.HINT_PRESET_DEFAULTS[kind]) if preset else None))
    return tuple(hints)


def _model_fps(form: Mapping[str, str], extra: Mapping[str, Any], input_fps: float | None,
               tuned: Mapping[str, Any], *, wsm_only: bool) -> float:
    """The frame rate the model runs at (pipeline_cosmos3.py:3465-3471)."""
    configured = next((float(extra[k]) for k in ("resolved_frame_rate", "frame_rate", "fps") if extra.get(k)), None)
    configured = configured or (float(form["fps"]) if form.get("fps") else None) or tuned.get("fps")
    request = float(form["fps"]) if form.get("fps") else None
    order = (configured, input_fps) if wsm_only else (input_fps, configured)
    return float(next((v for v in (*order, request) if v), vo.VIDEO_DEFAULTS["fps"]))
