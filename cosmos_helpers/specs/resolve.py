"""What the framework will run a sample with: its defaults, filled in the framework's order, each value's source.

The order of ``OmniSampleOverrides.build_sample`` (cosmos-framework 5eee9ed ``inference/args.py``): (1) the mode's
defaults file (or the sample's ``defaults_file``); (2) the model config (``resolution``: Nano/Super 720, Edge 480;
Edge's 121 video frames); (3) the input's fields, then command-line overrides merged over every sample of ``-i``;
(4) the framework's fill-ins (one frame for image modes, video frames rounded up to 4k+1, the negative metadata
promotion, conditioning frames, ``enable_sound`` for audio conditioning); (5) for transfer, the transfer defaults
and, with exactly one hint, that hint's tuned defaults for the fields left out.

A *profile* picks the model and guardrails and (with ``fill``, on every backend but the framework, which applies
its own) stands in for step 2 and the mode's tier, frames and steps, filling only what the input leaves unset.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

from ..errors import ValidationError
from ..limits import check_mode
from ..presets import MODES, VIDEO_SIZES, get_profile, model_for, normalize_tier
from ..protocol import framework as fw

OVERRIDABLE: tuple[str, ...] = ("resolution", "num_steps", "seed")  # what `cosmos-helpers run` may override
TEMPLATES = ("duration_template", "resolution_template", "inverse_duration_template", "inverse_resolution_template")
# What every generation sample must end up with (OmniSampleArgs has no default for them).
_REQUIRED: tuple[str, ...] = ("fps", "num_steps", "guidance", "shift", "sigma_max", "normalize_cfg", *TEMPLATES,
                              "negative_metadata_mode", "negative_prompt_keep_metadata", "video_save_quality",
                              "image_save_quality")
# How a filled-in value is typed in a ResolvedSample, by the field's annotation (``None`` stays ``None``: a transfer
# field of a sample without hints); other fields take the value as it is.
_CASTS: Mapping[str, Callable[[Any], Any]] = {
    "int": int, "int | None": int, "float": float, "bool": bool, "bool | None": bool,
    "tuple[float, float] | None": lambda pair: (float(pair[0]), float(pair[1])),
    "tuple[int, ...]": lambda indexes: tuple(int(i) for i in indexes)}
# The framework modes a profile has no defaults of, and the mode whose defaults stand in for them.
PROFILE_MODES: Mapping[str, str] = MappingProxyType({"audio_image2video": "image2video", "wam": "policy"})


@dataclass(frozen=True)
class ResolvedHint:  # control_path: absolute or a URL; preset: edge/blur only
    kind: str
    control_path: str | None
    weight: float
    preset: str | None


@dataclass(frozen=True)
class ResolvedSample:
    """The values the framework runs a sample with. ``None`` where the mode does not use a field."""
    name: str
    model: str
    profile: str | None
    model_mode: str
    prompt: str
    negative_prompt: str | None  # None: the framework's default caption file (not readable here)
    vision_path: str | None
    sound_path: str | None
    resolution: str | None
    aspect_ratio: str | None
    fps: int
    num_frames: int
    num_steps: int
    guidance: float
    guidance_interval: tuple[float, float] | None
    shift: float
    sigma_max: float
    normalize_cfg: bool
    seed: int | None  # None: derived by the framework from the name and output folder at run time
    duration_template: str | None  # None: no sentence (vLLM-Omni's use_duration_template false)
    resolution_template: str | None
    inverse_duration_template: str | None
    inverse_resolution_template: str | None
    negative_metadata_mode: str
    negative_prompt_keep_metadata: bool
    enable_sound: bool
    condition_frame_indexes_vision: tuple[int, ...]
    condition_video_keep: str
    video_save_quality: int
    image_save_quality: int
    num_outputs: int
    control_guidance: float
    control_guidance_interval: tuple[float, float] | None
    hints: tuple[ResolvedHint, ...]
    num_video_frames_per_chunk: int | None
    num_conditional_frames: int | None
    num_first_chunk_conditional_frames: int | None
    max_frames: int | None
    share_vision_temporal_positions: bool | None
    emphasize_control_in_prompt: bool | None
    show_control_condition: bool | None
    show_input: bool | None
    guardrails: bool
    sources: Mapping[str, str] = field(repr=False)
    notes: tuple[str, ...] = ()
    action_path: str | None = None  # action modes (forward_dynamics, inverse_dynamics, wam) only
    action_chunk_size: int | None = None
    domain_name: str | None = None
    image_size: int | None = None
    view_point: str | None = None
    raw_action_dim: int | None = None

    @property
    def is_transfer(self) -> bool:
        return bool(self.hints)

    @property
    def is_image(self) -> bool:
        return self.model_mode in fw.IMAGE_MODES

    @property
    def hint_kinds(self) -> tuple[str, ...]:
        return tuple(h.kind for h in self.hints)

    @property
    def chunk_frames(self) -> int | None:  # the chunk the framework generates
        chunk = self.num_video_frames_per_chunk
        return None if chunk is None else fw.round_up_frames(chunk)

    @property
    def normalized_weights(self) -> tuple[float, ...]:
        total = sum(h.weight for h in self.hints)
        return tuple(h.weight / total for h in self.hints) if total > 0 else ()

    @property
    def bucket_size(self) -> tuple[int, int] | None:
        """(width, height) of ``resolution`` x ``aspect_ratio``; a transfer without ``vision_path`` takes its
        aspect from the first control instead (see ``specs.transfer``)."""
        return None if self.resolution is None or self.aspect_ratio is None else \
            VIDEO_SIZES[self.resolution][self.aspect_ratio]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe record (tuples as lists)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["hints"] = [asdict(h) for h in self.hints]
        out["sources"] = dict(self.sources)
        return json.loads(json.dumps(out))


def resolve(sample: Any, *, profile: str | None = None, model: str | None = None,
            overrides: Mapping[str, Any] | None = None, output_dir: str | Path | None = None,
            guardrails: bool | None = None, fill: bool = True) -> ResolvedSample:
    """The framework's effective values for ``sample`` (a ``load.Sample``): ``model`` and ``guardrails`` win over the
    ``profile``'s; ``overrides`` are command-line values (``OVERRIDABLE``); ``output_dir`` is ``<out>/<name>``, from
    which the framework derives the seed of a sample without one."""
    return _Resolver(sample, profile, model, dict(overrides or {}), output_dir, guardrails, fill).run()


class _Resolver:
    def __init__(self, sample: Any, profile: str | None, model: str | None, overrides: dict[str, Any],
                 output_dir: str | Path | None, guardrails: bool | None, fill: bool) -> None:
        if unknown := sorted(set(overrides) - set(OVERRIDABLE)):
            raise ValidationError(unknown[0], "cannot be overridden here.", f"override only {', '.join(OVERRIDABLE)}.")
        if guardrails is not None and not isinstance(guardrails, bool):
            raise ValidationError("guardrails", f"expected True or False, got {guardrails!r}.",
                                  "pass guardrails=True or False, or leave it out for the profile's choice.")
        self.sample, self.f = sample, sample.fields
        self.profile = get_profile(profile) if profile else None
        self.fill = fill
        self.model = model_for(self.profile, model) if self.profile or model else \
            fw.MODEL_CONFIGS[fw.DEFAULT_CHECKPOINT]["hub"]
        self.guardrails = guardrails if guardrails is not None else \
            self.profile.guardrails if self.profile else fw.GUARDRAILS_DEFAULT
        self.overrides = _checked_overrides(overrides)
        self.output_dir = output_dir
        self.mode = sample.mode
        self.values: dict[str, Any] = {}
        self.sources: dict[str, str] = {"guardrails": "given" if guardrails is not None else
                                        f"profile {self.profile.name}" if self.profile else "the framework's default"}
        self.notes: list[str] = []
        self.user = {k for k in sample.fields.model_fields_set if sample.given(k)} | set(self.overrides)

    def put(self, key: str, value: Any, source: str) -> None:
        self.values[key], self.sources[key] = value, source

    def run(self) -> ResolvedSample:
        if self.mode in fw.REASONER_MODES:
            raise ValidationError("model_mode", "the reasoner writes text, not images or video; this project runs "
                                  "generation modes only.", "run reasoner samples with the framework's CLI directly.")
        self._defaults()
        self._model_config()
        self._profile()
        for key in sorted(self.user - set(self.overrides)):
            self.put(key, getattr(self.f, key), "input")
        for key, value in self.overrides.items():
            self.put(key, value, "command line")
        self._fill_ins()
        if self.sample.is_transfer:
            self._transfer()
        return self._build()

    def _defaults(self) -> None:
        f = self.f
        if f.defaults_file is not None:
            defaults = json.loads(Path(self.sample.path(f.defaults_file)).read_text(encoding="utf-8"))
            origin = f"defaults_file {f.defaults_file}"
        else:
            defaults, origin = builtin_defaults(self.mode), f"{self.mode} default"
        negative_file = defaults.pop("negative_prompt_file", None)
        for key, value in defaults.items():
            if key in fw.ALL_FIELDS:
                self.put(key, value, origin)
        if negative_file is not None and defaults.get("negative_prompt") is None:
            self.put("negative_prompt", None, f"the framework's defaults/{negative_file} (read by the framework only)")

    def _model_config(self) -> None:
        checkpoint = fw.CHECKPOINTS.get(self.model, self.model)
        if (config := fw.MODEL_CONFIGS.get(checkpoint)) is None:
            return
        if self.mode != "image2image" and self.values.get("resolution") is None:  # a defaults_file's wins
            self.put("resolution", config["resolution"], f"{checkpoint} config")
        if "num_frames" in config and self._plain_video():
            self.put("num_frames", config["num_frames"], f"{checkpoint} config")

    def _profile(self) -> None:
        mode = PROFILE_MODES.get(self.mode, self.mode)
        if self.profile is None or not self.fill or mode not in MODES or mode == "image2image":
            return  # an edit keeps the input image's size, as in the framework (see _model_config)
        check_mode(self.profile, mode)  # a variant's checkpoint runs only its own modes
        d, source = self.profile.defaults(mode), f"profile {self.profile.name}"
        fills = {"resolution": d.tier, "num_steps": d.num_inference_steps}
        if self._plain_video():
            fills["num_frames"] = d.num_frames
        for key, value in fills.items():
            if not self.sources.get(key, "").startswith("defaults_file"):  # the input's own defaults win
                self.put(key, value, source)

    def _plain_video(self) -> bool:
        return self.mode not in fw.IMAGE_MODES + fw.ACTION_MODES + fw.REASONER_MODES

    def _fill_ins(self) -> None:
        v = self.values
        if self.mode in fw.IMAGE_MODES and "num_frames" not in self.user:
            self.put("num_frames", 1, f"{self.mode} makes one frame")
        frames = v.get("num_frames")
        if frames is not None and fw.round_up_frames(frames) != frames:
            self.put("num_frames", fw.round_up_frames(frames), f"{self.sources['num_frames']}, rounded up to 4k+1")
            self.notes.append(f"num_frames {frames} runs as {fw.round_up_frames(frames)}: the framework rounds video "
                              "frame counts up to 4k+1 (the VAE's temporal grid).")
        if v.get("negative_prompt_keep_metadata") and v.get("negative_metadata_mode") == "none":
            self.put("negative_metadata_mode", "same", "promoted to 'same' by negative_prompt_keep_metadata")
        if "condition_frame_indexes_vision" not in self.user:
            kind = fw.vision_kind(self.f.vision_path)
            self.put("condition_frame_indexes_vision", fw.CONDITION_FRAMES.get(kind, ()), "framework default")
        if self.mode in fw.SOUND_CONDITION_MODES:
            self.put("enable_sound", True, f"{self.mode} conditions on sound")
        for key, value in fw.SAMPLE_FALLBACKS.items():
            v.setdefault(key, value)
        if "sigma_max" in self.user:
            self.notes.append("sigma_max is read by the EDM sampler only; the framework's default sampler (unipc) "
                              "ignores it.")
        self._negative_file()

    def _negative_file(self) -> None:
        """Read only when no negative prompt is set yet (args.py:885): never with the built-in defaults."""
        name = self.f.negative_prompt_file
        if name is None or "negative_prompt" in self.user:
            return
        if "negative_prompt" in self.sources:
            self.notes.append(f"negative_prompt_file {name!r} is not read by cosmos-framework {fw.VERSION}: the mode's "
                              "default negative prompt is already set (args.py:885). Put the caption in "
                              "negative_prompt to use it.")
            return
        path = Path(self.sample.path(name))
        if path.is_file():  # a defaults_file without a negative prompt: the file is read, as JSON
            self.put("negative_prompt", json.dumps(json.loads(path.read_text(encoding="utf-8"))),
                     f"negative_prompt_file {name}")
        else:
            self.put("negative_prompt", None,
                     f"the framework's defaults/{Path(name).name} (read by the framework only)")

    def _transfer(self) -> None:
        kinds = self.sample.hint_kinds
        tuned = fw.HINT_TUNED_DEFAULTS[kinds[0]] if len(kinds) == 1 else {}
        for defaults, source in ((fw.TRANSFER_SAMPLE_DEFAULTS, "transfer default"),
                                 (tuned, f"{kinds[0]} tuned default")):
            for key, value in defaults.items():
                if key not in self.user:
                    self.put(key, value, source)

    def _build(self) -> ResolvedSample:
        v, f = self.values, self.f
        missing = [key for key in _REQUIRED + ("num_frames",) if v.get(key) is None]
        if missing:  # only a defaults_file can leave these out; the framework then fails at build time
            raise ValidationError("defaults_file", f"neither the sample nor its defaults set {', '.join(missing)}.",
                                  "add them to the defaults file (start from the framework's "
                                  "defaults/<mode>/sample_args.json).")
        prompt = self._prompt()
        seed = v.get("seed")
        if seed is None and self.output_dir is not None:
            seed = fw.fallback_seed(self.sample.name, Path(self.output_dir).expanduser().absolute())
            self.sources["seed"] = "derived from the name and output folder (the framework's fallback seed)"
        self.sources.setdefault("seed", "derived by the framework at run time")
        self.sources.setdefault("model_mode", "inferred from vision_path and num_frames")
        given = dict(name=self.sample.name, model=self.model, profile=self.profile.name if self.profile else None,
                     model_mode=self.mode, prompt=prompt, vision_path=self.sample.path(f.vision_path),
                     sound_path=self.sample.path(f.sound_path), action_path=self.sample.path(f.action_path),
                     seed=seed,
                     hints=tuple(self._hint(kind) for kind in self.sample.hint_kinds), guardrails=self.guardrails,
                     sources=MappingProxyType(dict(self.sources)), notes=tuple(self.notes))
        return ResolvedSample(**given, **{
            f.name: None if v.get(f.name) is None else _CASTS.get(str(f.type), lambda value: value)(v[f.name])
            for f in fields(ResolvedSample) if f.name not in given})

    def _prompt(self) -> str:
        f = self.f
        if f.prompt is not None:
            return f.prompt
        if f.prompt_path is None:
            self.sources["prompt"] = "none given (empty)"
            return ""
        path = Path(self.sample.path(f.prompt_path))
        self.sources["prompt"] = f"prompt_path {f.prompt_path}"
        text = path.read_text(encoding="utf-8")
        if self.sample.is_transfer and path.suffix.lower() == ".json":  # args.py _load_transfer_prompt_path
            try:
                return json.dumps(json.loads(text))
            except json.JSONDecodeError as exc:
                raise ValidationError("prompt_path", f"{path} is not valid JSON ({exc.msg}).",
                                      "fix the JSON.") from None
        return text.strip()

    def _hint(self, kind: str) -> ResolvedHint:
        hint = getattr(self.f, kind)
        preset_field = fw.PRESET_FIELDS.get(kind)
        preset = (getattr(hint, preset_field) or fw.HINT_PRESET_DEFAULTS[kind]) if preset_field else None
        return ResolvedHint(kind=kind, control_path=self.sample.path(hint.control_path),
                            weight=1.0 if hint.weight is None else float(hint.weight), preset=preset)


def builtin_defaults(mode: str) -> dict[str, Any]:
    """The framework's own defaults for a mode (its ``defaults/<mode>/sample_args.json`` and prompt defaults), which
    a sample's ``defaults_file`` replaces."""
    return {**fw.MODE_DEFAULTS.get(mode, {}), **fw.PROMPT_DEFAULTS,
            "resolution_template": fw.RESOLUTION_TEMPLATES["image" if mode in fw.IMAGE_MODES else "video"]}


def _checked_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Command-line values, typed as the fields they replace (``resolution`` may be this project's CPU tier)."""
    checked = {k: v for k, v in overrides.items() if v is not None}
    if checked.get("resolution") is not None:
        checked["resolution"] = check_tier(checked["resolution"])
    for key, low in (("num_steps", 1), ("seed", 0)):
        value = checked.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise ValidationError(key, f"{value!r} is not an integer >= {low}.", f"pass e.g. {key}={max(low, 1)}.")
    return checked


def check_tier(tier: str | int) -> str:
    """``tier`` as a key of ``VIDEO_SIZES`` (``720``, ``"720p"`` -> ``"720"``), or a ValidationError."""
    tier = normalize_tier(tier)
    if tier not in VIDEO_SIZES:
        raise ValidationError("resolution", f"unknown tier {tier!r}.", f"use one of {', '.join(VIDEO_SIZES)}.")
    return tier
