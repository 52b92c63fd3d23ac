"""vLLM-Omni 0.30.0 transfer on the stand-in: the request rebuilt as the transfer vLLM-Omni would run, then run on
diffusers. vLLM-Omni's transfer (``diffusion/models/cosmos3/``) differs from the framework's:

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
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ... import media
from ...errors import ValidationError
from ...presets import model_for
from ...protocol import framework as fw
from ...protocol import vllm_omni as vo
from ...result import Generation
from ...specs.resolve import ResolvedHint, ResolvedSample
from .references import TransferRunner


def make_transfer_runner(model: str | None = None, *, backend: Any = None, guardrails: bool = False,
                         step_cache: Any = None) -> TransferRunner:
    """The local server's ``transfer_runner(form_fields, extra_params, rgb_video_path, control_paths)``: the
    request's transfer with vLLM-Omni's semantics, on ``backend`` (default ``DiffusersBackend()``) with ``model``.
    ``guardrails`` is the server's switch (vLLM-Omni's ``--no-guardrails``): off, no request turns them on."""
    model = model_for(model=model)

    def runner(form_fields: dict[str, str], extra_params: dict, rgb_video_path: Path | None,
               control_paths: dict[str, Path]) -> Generation:
        from ...backends.diffusers import DiffusersBackend
        from ...backends.diffusers.transfer import run_transfer  # OpenCV and the modular blocks load on first use
        from ...specs.transfer import prepare_transfer

        r, aspect, fps = vllm_transfer(form_fields, extra_params, rgb_video_path, control_paths, model=model,
                                       guardrails=guardrails)
        prepared = prepare_transfer(r, aspect_ratio=aspect, fps=fps, emit_warnings=False)
        return run_transfer(prepared, backend=backend or DiffusersBackend(progress=False), progress=False,
                            step_cache=step_cache)
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
        duration_template=fw.PROMPT_DEFAULTS["duration_template"] if x.flag("use_duration_template") else None,
        resolution_template=fw.RESOLUTION_TEMPLATES["video"] if x.flag("use_resolution_template") else None,
        **{key: fw.PROMPT_DEFAULTS[key] for key in ("sigma_max", "inverse_duration_template",  # no such options
                                                    "inverse_resolution_template", "video_save_quality",
                                                    "image_save_quality")},
        negative_metadata_mode=str(x.get("negative_metadata_mode")), negative_prompt_keep_metadata=False,
        enable_sound=False, condition_frame_indexes_vision=(), condition_video_keep="first", num_outputs=1,
        control_guidance=float(x.get("control_guidance")),
        control_guidance_interval=None if interval is None else fw.to_strict(interval),
        hints=hints, max_frames=min(cap, int(x.get("max_frames"))),
        **{key: int(x.get(key)) for key in ("num_video_frames_per_chunk", "num_conditional_frames",
                                            "num_first_chunk_conditional_frames")},
        **{key: x.flag(key) for key in ("share_vision_temporal_positions", "emphasize_control_in_prompt",
                                        "show_control_condition", "show_input")},
        guardrails=guardrails and x.flag("guardrails", default=vo.GENERATION_EXTRA["guardrails"]),
        sources={}, notes=())
    return r, aspect, fps


class _Extra:
    """``extra_params`` as vLLM-Omni reads them: the first key given, else the single hint's tuned default, else the
    pipeline's (``TRANSFER_EXTRA``)."""

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
