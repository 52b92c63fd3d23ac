"""One run of a sample on one backend: what each backend can honour, the request it becomes, and its fingerprint.

A framework input runs *unchanged* on the framework; on diffusers and vLLM-Omni with the same meaning or not at all:
a field a backend cannot honour is refused before any work, fields the framework itself ignores are accepted and
recorded. URL inputs are fetched into the framework's download cache (:func:`fetch`), so both find the same file.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .. import media
from ..errors import ValidationError
from ..presets import MODES
from ..prompts import parse_caption
from ..protocol import action as ap
from ..protocol import framework as fw
from ..protocol import variants
from ..protocol import vllm_omni as vo
from ..request import GenerationRequest
from ..result import record_fingerprint
from ..step_cache import StepCache, check_step_cache, step_cache_record
from .load import Sample
from .resolve import TEMPLATES, ResolvedSample, builtin_defaults


def given_fields(sample: Sample, overrides: Mapping[str, Any] | None = None,
                 resolved: ResolvedSample | None = None) -> set[str]:
    """The fields the input (or the command line) sets, hint fields as ``edge.weight``. With ``resolved``, also what the
    sample's own files set (the framework runs with those, so another backend must send or refuse them): its
    ``defaults_file`` where it departs from the built-in defaults, and the caption of its ``negative_prompt_file``."""
    given = {k for k in sample.fields.model_fields_set if getattr(sample.fields, k) is not None}
    for kind in sample.hint_kinds:
        hint = getattr(sample.fields, kind)
        given |= {f"{kind}.{k}" for k in hint.model_fields_set if getattr(hint, k) is not None}
    if resolved is not None:
        builtin = json.loads(json.dumps({**fw.SAMPLE_FALLBACKS, **builtin_defaults(resolved.model_mode)}))
        record = resolved.to_dict()
        given |= {k for k, source in resolved.sources.items()
                  if source.startswith("defaults_file") and k in record and record[k] != builtin.get(k)}
        if resolved.sources.get("negative_prompt", "").startswith("negative_prompt_file") \
                and resolved.negative_prompt is not None:
            given.add("negative_prompt")
    return given | {k for k, v in (overrides or {}).items() if v is not None}


@dataclass(frozen=True)
class SampleSupport:
    """What a backend running a sample as a request supports beyond a request's fields: each backend states its own
    (``Backend.sample_support``), so the checks below never ask which backend it is."""
    transfer: bool = False  # runs transfer samples (its own transfer path)
    sound_conditioning: bool = False  # runs audio_image2video (diffusers' experimental loop)
    action_domains: Mapping[str, Any] = field(default_factory=dict)  # the action embodiments it knows
    view_point: bool = True  # reads an action sample's camera viewpoint
    encodes_itself: bool = False  # a server that encodes the output its own way (no save qualities)
    always_shares_positions: bool = False  # its transfer always shares control and target positions


def check_portable(sample: Sample, r: ResolvedSample) -> None:
    """Refuse, before any work, what no backend runs as the framework would (the framework's own included): a
    ``model`` the run does not use, or an edit given only one of resolution and aspect ratio (inference.py:626-632:
    the framework sizes an edit from a bucket only given both, and silently drops one given alone)."""
    named = sample.fields.model
    if named is not None and fw.CHECKPOINTS.get(named, named) != fw.CHECKPOINTS.get(r.model, r.model):
        raise ValidationError("model", f"the sample names {named!r} but the run uses {r.model!r}.",
                              f"run it with --model {named} (or the profile of that model), or remove model.")
    if r.model_mode == "image2image" and bool(r.resolution) != bool(r.aspect_ratio):
        name, other = ("resolution", "aspect_ratio") if r.resolution else ("aspect_ratio", "resolution")
        raise ValidationError(name, f"image2image with {name} {getattr(r, name)!r} but no {other}: the framework "
                              f"sizes an edit from a bucket only given both, and would ignore {name}.",
                              f"add {other} too, or remove {name} to keep the input's shape (longer side 512).")


def check_as_request(sample: Sample, r: ResolvedSample, given: set[str], backend: str,
                     support: SampleSupport) -> None:
    """Refuse, before any work, what ``backend`` (a name) cannot run as the framework would, given ``support``."""
    def refuse(name: str, problem: str, fix: str | None = None) -> None:
        origin = r.sources.get(name, "")
        where = f" (set by its {origin})" if origin.startswith(("defaults_file", "negative_prompt_file")) else ""
        raise ValidationError(name, f"{backend} cannot run this{where}: {problem}",
                              fix or f"remove {name}, or run the sample on the framework backend.")

    def refuse_given(names: Iterable[str], problem: str) -> None:  # the first of ``names`` the input sets
        for name in names:
            if name in given:
                refuse(name, problem)

    mode = r.model_mode
    if mode == "image2image" and backend not in variants.IMAGE2IMAGE_BACKENDS:
        refuse("model_mode", f"{variants.IMAGE2IMAGE_REFUSAL.get(backend, 'it has no image-edit path')}.",
               "use --backend diffusers or framework.")
    if mode in fw.ACTION_MODES:
        _check_action(r, backend, support, refuse, refuse_given)
        return
    if mode in fw.SOUND_CONDITION_MODES and not support.sound_conditioning:
        refuse("model_mode", f"{mode}: vLLM-Omni {vo.VERSION} has no audio conditioning.",
               "run it on diffusers (experimental) or the framework.")
    if r.is_transfer and not support.transfer:
        refuse("model_mode", "it has no transfer path.", "run it on diffusers, vLLM-Omni or the framework.")
    if sample.fields.prompt_upsampling:
        refuse("prompt_upsampling", "prompt upsampling needs the framework's reasoner.")
    if r.num_outputs > 1:
        refuse("num_outputs", f"{r.num_outputs} outputs per sample; it makes one.", "use num_outputs 1 and several "
               "samples with different seeds.")
    refuse_given(("tensors_file", "pickle_file"), "it feeds the framework's own data loader.")
    if r.is_transfer:
        if support.always_shares_positions and r.share_vision_temporal_positions is False:
            refuse("share_vision_temporal_positions", f"{backend}' transfer always shares the control and target "
                   "positions (as the model was trained).")
    elif mode in fw.SOUND_CONDITION_MODES:
        refuse_given(("guidance_interval", "normalize_cfg"),
                     f"the experimental {mode} loop applies guidance on every step, unnormalised.")
    elif mode in MODES:
        _check_generation(r, refuse, refuse_given, encodes_itself=support.encodes_itself)


def _check_generation(r: ResolvedSample, refuse, refuse_given, *, encodes_itself: bool) -> None:
    """Generation requests: the options a ``GenerationRequest`` has no field for."""
    mode = r.model_mode
    refuse_given(("negative_metadata_mode", "negative_prompt_keep_metadata", "normalize_cfg"),
                 "a generation request has no such option.")
    builtin = builtin_defaults(mode)
    refuse_given([name for name in TEMPLATES if getattr(r, name) != builtin[name]], "custom template sentences are "
                 "the framework's only (diffusers and vLLM-Omni have their own, equal to the framework's defaults).")
    if r.enable_sound and r.sound_path is not None:
        refuse("sound_path", "sound-conditioned generation (enable_sound with sound_path) is not a generation "
               "request; only audio_image2video is (experimental, diffusers).")
    if r.enable_sound and r.is_image:
        refuse("enable_sound", f"{mode} makes a still image, which cannot carry sound.")
    if mode == "text2video" and r.vision_path is not None:
        refuse("vision_path", "the framework conditions text2video on a vision_path too; here text2video takes none.",
               "set model_mode to image2video (or video2video), or remove vision_path.")
    if mode == "image2video" and r.condition_frame_indexes_vision != (0,):
        refuse_given(("condition_frame_indexes_vision",), "image2video conditions on latent frame 0 only.")
    if encodes_itself:
        refuse_given(("video_save_quality", "image_save_quality"), "the server encodes the output its own way.")


def _check_action(r: ResolvedSample, backend: str, support: SampleSupport, refuse, refuse_given) -> None:
    """Action samples: the embodiment must be one the backend knows, with the framework's width."""
    domains = support.action_domains
    name = (r.domain_name or "").strip().lower()
    if name not in domains or name not in ap.RAW_DIM:
        refuse("domain_name", f"{backend} knows no action embodiment {r.domain_name!r}.",
               f"use one of {', '.join(sorted(set(domains) & set(ap.RAW_DIM)))}, or the framework backend.")
    if r.raw_action_dim is not None and r.raw_action_dim != ap.RAW_DIM[name]:
        refuse("raw_action_dim", f"{name} actions have {ap.RAW_DIM[name]} values per step, not {r.raw_action_dim}.",
               "remove raw_action_dim (the embodiment fixes it).")
    if not support.view_point and r.view_point:
        refuse("view_point", f"vLLM-Omni {vo.VERSION} reads no camera viewpoint for action requests.",
               "remove view_point, or run the sample on diffusers or the framework.")
    refuse_given(("negative_metadata_mode", "negative_prompt_keep_metadata", "normalize_cfg", *TEMPLATES),
                 "an action run builds its own caption, with no negative, and guides unnormalised.")


def generation_request(r: ResolvedSample, given: set[str], step_cache: StepCache = None) -> GenerationRequest:
    """The :class:`GenerationRequest` of a resolved sample (local media paths) and the run's ``step_cache`` (the
    framework's command line sets it): what to generate always concrete; backend options (``negative_prompt``, the
    templates, ``guidance_interval`` made inclusive) only where the input sets them."""
    options: dict[str, Any] = {}
    if r.guidance_interval is not None and "guidance_interval" in given:
        options["guidance_interval"] = fw.to_inclusive(r.guidance_interval)
    if r.profile is not None:
        options["profile"] = r.profile
    if r.model_mode in fw.ACTION_MODES:
        return _action_request(r, options, step_cache)
    video = r.model_mode not in fw.IMAGE_MODES
    if "negative_prompt" in given:
        options["negative_prompt"] = r.negative_prompt
    if not isinstance(parse_caption(r.prompt), dict):  # a JSON caption gets metadata instead, on every backend
        options.update({f"add_{name}": True for name in ("duration_template", "resolution_template") if name in given})
    if r.model_mode in ("image2video", "image2image"):
        options["image"] = Path(r.vision_path)
    if r.model_mode == "video2video":
        options.update(video=Path(r.vision_path), condition_frames=r.condition_frame_indexes_vision,
                       condition_video_keep=r.condition_video_keep)
    return GenerationRequest(  # an edit has both tier and aspect or neither (check_portable)
        mode=r.model_mode, prompt=r.prompt, model=r.model, guardrails=r.guardrails,
        tier=r.resolution, aspect_ratio=r.aspect_ratio, num_frames=r.num_frames if video else None, fps=r.fps,
        num_inference_steps=r.num_steps, guidance_scale=r.guidance, flow_shift=r.shift, seed=int(r.seed),
        sound=r.enable_sound, step_cache=step_cache, **options)


def _action_request(r: ResolvedSample, options: dict[str, Any], step_cache: StepCache) -> GenerationRequest:
    """The request of an action sample. The framework reads ``action_chunk_size + 1`` frames of ``vision_path`` and
    conditions forward dynamics and policy on the first (inference/action.py:202); the action file is a ``[T][D]``
    JSON array (:56-58); ``image_size`` is the action tier. Its guidance interval is read as for any sample
    (inference.py:1709), its negative prompt is not (no negative caption in the action batch), so none is sent."""
    mode = ap.MODES[list(ap.FRAMEWORK_MODES.values()).index(r.model_mode)]
    vision = Path(r.vision_path)
    if mode in ap.TAKES_VIDEO:
        options["video"] = vision
    elif vision.suffix.lower() in fw.IMAGE_EXTENSIONS:
        options["image"] = vision
    else:
        options["image"] = media.load_video_frames(vision, max_frames=1)[0][0]
    if mode in ap.GIVES_ACTIONS:
        options["actions"] = Path(r.action_path)
    if r.view_point:
        options["view_point"] = r.view_point
    return GenerationRequest(
        mode=mode, prompt=r.prompt, model=r.model, guardrails=r.guardrails, tier=str(r.image_size),
        num_frames=r.action_chunk_size + 1, fps=r.fps, num_inference_steps=r.num_steps, guidance_scale=r.guidance,
        flow_shift=r.shift, seed=int(r.seed), embodiment=r.domain_name, step_cache=step_cache, **options)


def localize(r: ResolvedSample, *, progress: bool = True) -> ResolvedSample:
    """``r`` with every URL input replaced by its local copy (the framework's download cache: module docstring)."""
    def local(value: str | None, name: str) -> str | None:
        return str(fetch(value, name, progress=progress)) if value is not None and fw.is_url(value) else value

    hints = tuple(dataclasses.replace(h, control_path=local(h.control_path, f"{h.kind}.control_path"))
                  for h in r.hints)
    paths = {name: local(getattr(r, name), name) for name in ("vision_path", "sound_path", "action_path")}
    return dataclasses.replace(r, **paths, hints=hints)


DEFAULT_CACHE = Path("~/.cache/cosmos-helpers/downloads")
TIMEOUT_S = 60.0


def fetch(url: str, field: str, *, progress: bool = True) -> Path:
    """The local copy of ``url`` given in ``field`` (``vision_path``, ``edge.control_path``, ...), cached or fetched."""
    from .download import download  # httpx loads on first use
    name = fw.DOWNLOAD_NAMES[field.split(".")[-1]] + Path(url.split("?")[0]).suffix.lower()
    root = Path(os.environ.get(fw.DOWNLOAD_CACHE_ENV) or DEFAULT_CACHE).expanduser()
    target = fw.download_cache_path(url, name, root)
    marker = Path(f"{target}.done")
    if target.is_file() and marker.is_file():
        return target
    if url.startswith("s3://"):
        raise _offline(url, field, target, "s3:// URLs are fetched by the framework's object store client only")
    try:
        with media.atomic_path(target, overwrite=True) as tmp, open(tmp, "wb") as handle:
            download(url, handle, timeout=TIMEOUT_S, progress=progress)
    except Exception as exc:  # httpx's transport and status errors, a full disk
        raise _offline(url, field, target, f"{type(exc).__name__}: {exc}") from None
    marker.write_text(url, encoding="utf-8")
    return target


def _offline(url: str, field: str, target: Path, reason: str) -> ValidationError:
    return ValidationError(
        field, f"cannot download {url} ({reason}).",
        f"place the file at {target} and create an empty {target.name}.done beside it (that is the framework's "
        f"cache layout; ${fw.DOWNLOAD_CACHE_ENV} chooses the folder), or give a local path instead of the URL.")


@dataclass(frozen=True)
class SampleRun:
    """What one output is made from; ``Generation.request`` of every output of ``run_spec``. ``step_cache`` is the
    run's (``None``: the backend's own default), as the framework's command line sets it for every sample."""
    sample: Sample
    resolved: ResolvedSample
    overrides: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, Any] = field(default_factory=dict)
    step_cache: StepCache = None

    @classmethod
    def create(cls, sample: Sample, resolved: ResolvedSample, overrides: Mapping[str, Any] | None = None,
               step_cache: StepCache = None) -> SampleRun:
        """Record the content of every local input file (URLs: the cached copy the run uses)."""
        paths = {**sample.path_fields(), "vision_path": resolved.vision_path, "sound_path": resolved.sound_path,
                 "action_path": resolved.action_path,
                 **{f"{h.kind}.control_path": h.control_path for h in resolved.hints}}
        local = {key: sample.path(value) for key, value in sorted(paths.items())}  # URLs and None as they are
        files = {key: media.file_sha256(path) if not fw.is_url(path) and Path(path).is_file() else path
                 for key, path in local.items() if path is not None}
        return cls(sample=sample, resolved=resolved, overrides=dict(overrides or {}), files=files,
                   step_cache=check_step_cache(step_cache))

    @property
    def given(self) -> set[str]:
        return given_fields(self.sample, self.overrides, self.resolved)

    def to_dict(self) -> dict[str, Any]:
        """The resolved values (``model_mode``, ``prompt``, ``num_steps``... at the top, as galleries read them), the
        input as written, the overrides and the input files' content hashes."""
        record = self.resolved.to_dict()
        record.pop("sources", None)
        record.update(input=json.loads(json.dumps(dict(self.sample.data))), overrides=dict(self.overrides),
                      files=dict(self.files))
        if self.step_cache is not None:  # left out otherwise, so earlier outputs keep their fingerprints
            record["step_cache"] = step_cache_record(self.step_cache)
        return record

    def fingerprint(self) -> str:
        """What a rerun compares."""
        return record_fingerprint(self.to_dict())


@dataclass(frozen=True)
class PlannedRun:
    """What ``plan_spec`` found: the checked run, and what the backend made of it for elsewhere: the framework's
    written run folder (``input_file``, ``command``) or what a server would be sent (``payload``, ``extra``)."""
    run: SampleRun
    folder: Path | None = None
    input_file: Path | None = None
    command: tuple[str, ...] | None = None
    payload: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def fingerprint(self) -> str:
        return self.run.fingerprint()

    def to_dict(self) -> dict[str, Any]:
        sent = {} if self.payload is None else {"payload": dict(self.payload)}
        return {**self.run.to_dict(), **sent, **self.extra}
