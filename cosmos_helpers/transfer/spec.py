"""The Cosmos Framework transfer spec (the JSON given to ``cosmos_framework.scripts.inference -i``).

Two views of one spec are kept apart on purpose:

* what the *user wrote* (``TransferSpec`` fields, ``None`` = not given) -- this is what ``to_dict`` /
  ``write_spec`` give back, key for key and in the same order, so a spec we load and save never drifts
  from the file a person edits;
* what the framework will *use* (``TransferSpec.resolved()``) -- modality defaults, then the user's
  fields, then the transfer defaults, then the per-hint tuned defaults for a single hint
  (``inference/args.py`` of the framework). The framework applies those silently, and a spec that looks
  like "guidance 6" running at guidance 3 is the kind of surprise this module exists to remove.

Everything that the framework would reject, or would run in a way the user probably did not mean, is
raised here as a ``ValidationError`` naming the field, before any model is loaded.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cosmos_helpers import media
from cosmos_helpers.errors import OutputExistsError, ValidationError
from cosmos_helpers.presets import TIERS, VIDEO_SIZES, nearest_aspect, normalize_aspect, normalize_tier

HINT_KINDS: tuple[str, ...] = ("edge", "blur", "depth", "seg", "wsm")
COMPUTABLE_HINTS: tuple[str, ...] = ("edge", "blur")
EDGE_PRESETS: tuple[str, ...] = ("very_low", "low", "medium", "high", "very_high")
BLUR_PRESETS: tuple[str, ...] = ("none", "very_low", "low", "medium", "high", "very_high")
PRESET_FIELDS: Mapping[str, str] = MappingProxyType({"edge": "preset_edge_threshold", "blur": "preset_blur_strength"})
_PRESET_CHOICES: Mapping[str, tuple[str, ...]] = MappingProxyType({"edge": EDGE_PRESETS, "blur": BLUR_PRESETS})

# Tiers the framework's (non-training) inference accepts for video; "1080" is image-only there.
FRAMEWORK_TIERS: tuple[str, ...] = ("256", "480", "720", "768")
SPEC_ASPECT_RATIOS: tuple[str, ...] = ("1,1", "4,3", "3,4", "16,9", "9,16")
MODEL_MODES: tuple[str, ...] = (
    "text2image",
    "text2video",
    "image2image",
    "image2video",
    "video2video",
    "audio_image2video",
)
NEGATIVE_METADATA_MODES: tuple[str, ...] = ("none", "same", "inverse")
TRANSFER_MODEL_MODES: tuple[str, ...] = ("text2video", "image2video", "video2video")
VIDEO_EXTENSIONS: frozenset[str] = frozenset({".mp4", ".avi", ".mov", ".mkv", ".webm"})
IMAGE_EXTENSIONS: frozenset[str] = frozenset({".png", ".jpg", ".jpeg"})

DURATION_TEMPLATE = "The video is {duration:.1f} seconds long and is of {fps:.0f} FPS."
RESOLUTION_TEMPLATE = "This video is of {height}x{width} resolution."
INVERSE_DURATION_TEMPLATE = "The video is not {duration:.1f} seconds long and is not of {fps:.0f} FPS."
INVERSE_RESOLUTION_TEMPLATE = "This video is not of {height}x{width} resolution."
CONTROL_DIRECTIVE = (
    "Follow the {hints} control video precisely: shape, contour, silhouette, position, and motion of every "
    "visible structure must align with the {hints} signal at every frame."
)

# Framework modality defaults (``inference/defaults/<mode>/sample_args.json``) as far as they matter to a
# spec. The default negative prompt is a file inside the framework package, so it is only named here.
MODALITY_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "resolution": "720",
        "aspect_ratio": "16,9",
        "fps": 24,
        "num_frames": 189,
        "num_steps": 35,
        "guidance": 6.0,
        "guidance_interval": None,
        "shift": 10.0,
        "sigma_max": 80.0,
        "normalize_cfg": False,
        "seed": None,
        "duration_template": DURATION_TEMPLATE,
        "resolution_template": RESOLUTION_TEMPLATE,
        "inverse_duration_template": INVERSE_DURATION_TEMPLATE,
        "inverse_resolution_template": INVERSE_RESOLUTION_TEMPLATE,
        "negative_metadata_mode": "none",
        "negative_prompt_keep_metadata": True,
        "control_guidance": 1.0,
        "control_guidance_interval": None,
        "video_save_quality": 10,
    }
)
FRAMEWORK_DEFAULT_NEGATIVE_FILE = "neg_prompts.json"
TRANSFER_SAMPLE_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "num_video_frames_per_chunk": 93,
        "num_conditional_frames": 1,
        "max_frames": 5000,
        "show_control_condition": False,
        "show_input": False,
        "num_first_chunk_conditional_frames": 0,
        "share_vision_temporal_positions": True,
        "emphasize_control_in_prompt": True,
    }
)
# Applied only when exactly one hint is present, and only to fields the user did not give.
HINT_TUNED_DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "edge": MappingProxyType({"guidance": 3.0, "control_guidance": 1.5, "shift": 10.0}),
        "blur": MappingProxyType({"guidance": 3.0, "control_guidance": 1.5, "shift": 10.0}),
        "depth": MappingProxyType({"guidance": 3.0, "control_guidance": 1.5, "shift": 10.0}),
        "seg": MappingProxyType({"guidance": 3.0, "control_guidance": 2.0, "shift": 10.0}),
        "wsm": MappingProxyType(
            {
                "guidance": 1.0,
                "control_guidance": 3.0,
                "shift": 10.0,
                "num_frames": 101,
                "fps": 10,
                "num_video_frames_per_chunk": 101,
            }
        ),
    }
)
# Fields that only mean something for transfer: the framework rejects them on a spec without a hint.
TRANSFER_ONLY_FIELDS: tuple[str, ...] = (
    "control_guidance_interval",
    "negative_prompt_file",
    "num_video_frames_per_chunk",
    "num_conditional_frames",
    "max_frames",
    "show_control_condition",
    "show_input",
    "num_first_chunk_conditional_frames",
    "share_vision_temporal_positions",
    "emphasize_control_in_prompt",
)

_STR, _INT, _FLOAT, _BOOL, _INTERVAL = "str", "int", "float", "bool", "interval"
# Top-level schema fields (hints excluded) and their JSON types, in the framework's documentation order.
FIELD_TYPES: Mapping[str, str] = MappingProxyType(
    {
        "name": _STR,
        "model_mode": _STR,
        "prompt": _STR,
        "prompt_path": _STR,
        "negative_prompt": _STR,
        "negative_prompt_file": _STR,
        "vision_path": _STR,
        "sound_path": _STR,
        "resolution": _STR,
        "aspect_ratio": _STR,
        "fps": _INT,
        "num_frames": _INT,
        "num_steps": _INT,
        "guidance": _FLOAT,
        "guidance_interval": _INTERVAL,
        "shift": _FLOAT,
        "sigma_max": _FLOAT,
        "normalize_cfg": _BOOL,
        "seed": _INT,
        "duration_template": _STR,
        "resolution_template": _STR,
        "inverse_duration_template": _STR,
        "inverse_resolution_template": _STR,
        "negative_metadata_mode": _STR,
        "negative_prompt_keep_metadata": _BOOL,
        "control_guidance": _FLOAT,
        "control_guidance_interval": _INTERVAL,
        "num_video_frames_per_chunk": _INT,
        "num_conditional_frames": _INT,
        "num_first_chunk_conditional_frames": _INT,
        "max_frames": _INT,
        "share_vision_temporal_positions": _BOOL,
        "emphasize_control_in_prompt": _BOOL,
        "show_control_condition": _BOOL,
        "show_input": _BOOL,
        "video_save_quality": _INT,
    }
)
PATH_FIELDS: tuple[str, ...] = ("prompt_path", "negative_prompt_file", "vision_path", "sound_path")
_HINT_COMMON_KEYS: tuple[str, ...] = ("control_path", "weight")
_HINT_KEY_ALIASES: Mapping[str, str] = MappingProxyType({"control_weight": "weight", "path": "control_path"})


def _is_url(value: str) -> bool:
    return "://" in value


def _resolve_path(value: str | None, base_dir: Path) -> str | None:
    """Relative paths in a spec are relative to the spec's folder (as in the framework); URLs stay URLs."""
    if value is None or _is_url(value):
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (base_dir / path).resolve())


def _close_match(name: str, candidates: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def round_up_chunk(chunk: int) -> int:
    """Round a chunk length up to ``4k + 1`` -- the causal VAE's frame grid, as the framework does."""
    return max(1, math.ceil((int(chunk) - 1) / 4) * 4 + 1)


@dataclass
class Hint:
    """One control hint as written in the spec (``None`` = not given; effective values in ``resolved()``).

    ``preset`` is ``preset_edge_threshold`` for edge and ``preset_blur_strength`` for blur; the other
    hints have no preset because their maps cannot be computed from RGB.
    """

    kind: str
    control_path: str | None = None
    weight: float | None = None
    preset: str | None = None
    _key_order: list[str] = field(default_factory=list, repr=False, compare=False)
    _nulls: set[str] = field(default_factory=set, repr=False, compare=False)

    @classmethod
    def from_dict(cls, kind: str, data: Any) -> Hint:
        if kind not in HINT_KINDS:
            raise ValidationError(kind, f"unknown hint {kind!r}.", f"use one of {', '.join(HINT_KINDS)}.")
        if not isinstance(data, Mapping):
            raise ValidationError(
                kind,
                f"a hint must be a JSON object, got {type(data).__name__} {data!r}.",
                f'write "{kind}": {{"control_path": "..."}} (or {{}} to compute it from vision_path).',
            )
        allowed = _HINT_COMMON_KEYS + ((PRESET_FIELDS[kind],) if kind in PRESET_FIELDS else ())
        hint = cls(kind=kind)
        for key, value in data.items():
            if key not in allowed:
                alias = PRESET_FIELDS.get(kind) if key == "preset" else _HINT_KEY_ALIASES.get(key)
                suggestion = alias or _close_match(key, allowed)
                fix = f"did you mean {suggestion!r}? " if suggestion else ""
                raise ValidationError(
                    f"{kind}.{key}",
                    f"unknown key in the {kind} hint.",
                    f"{fix}{kind} accepts {', '.join(allowed)}.",
                )
            hint._key_order.append(key)
            if value is None:
                hint._nulls.add(key)
                continue
            setattr(hint, "preset" if key in PRESET_FIELDS.values() else key, value)
        return hint

    @property
    def preset_field(self) -> str | None:
        return PRESET_FIELDS.get(self.kind)

    def to_dict(self, path_rebase: Callable[[str], str] | None = None) -> dict[str, Any]:
        """The hint as the user wrote it (plus fields set in code), keys in the original order."""
        values = {"control_path": self.control_path, "weight": self.weight}
        if self.preset_field:
            values[self.preset_field] = self.preset
        elif self.preset is not None:
            raise ValidationError(f"{self.kind}.preset", f"{self.kind} has no preset.", "remove the preset.")
        if path_rebase is not None and self.control_path is not None:
            values["control_path"] = path_rebase(self.control_path)
        out: dict[str, Any] = {}
        for key in self._key_order + [k for k in values if k not in self._key_order]:
            value = values[key]
            if value is not None or (key in self._key_order and key in self._nulls):
                out[key] = value
        return out


@dataclass(frozen=True)
class ResolvedHint:
    """A hint with its effective values: absolute control path, weight, preset (edge/blur only)."""

    kind: str
    control_path: str | None
    weight: float
    preset: str | None


@dataclass(frozen=True)
class ResolvedSpec:
    """The values the framework will actually run with; ``sources`` says where each one came from."""

    name: str | None
    model_mode: str
    prompt: str
    negative_prompt: str | None
    vision_path: str | None
    sound_path: str | None
    resolution: str
    aspect_ratio: str
    fps: int
    num_frames: int
    num_steps: int
    guidance: float
    guidance_interval: tuple[float, float] | None
    shift: float
    sigma_max: float
    normalize_cfg: bool
    seed: int | None
    duration_template: str
    resolution_template: str
    inverse_duration_template: str
    inverse_resolution_template: str
    negative_metadata_mode: str
    negative_prompt_keep_metadata: bool
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
    video_save_quality: int
    base_dir: str
    sources: Mapping[str, str]

    @property
    def is_transfer(self) -> bool:
        return bool(self.hints)

    @property
    def hint_kinds(self) -> tuple[str, ...]:
        return tuple(h.kind for h in self.hints)

    @property
    def chunk_frames(self) -> int | None:
        """The chunk length the framework uses (``num_video_frames_per_chunk`` rounded up to 4k+1)."""
        if self.num_video_frames_per_chunk is None:
            return None
        return round_up_chunk(self.num_video_frames_per_chunk)

    @property
    def normalized_weights(self) -> tuple[float, ...]:
        total = sum(h.weight for h in self.hints)
        return tuple(h.weight / total for h in self.hints) if total > 0 else ()

    @property
    def bucket_size(self) -> tuple[int, int]:
        """(width, height) of ``resolution`` x ``aspect_ratio``.

        This is the output geometry when ``vision_path`` is set. Without it the framework takes the aspect
        from the first control video instead (see ``controls.bucket_for``).
        """
        return VIDEO_SIZES[self.resolution][self.aspect_ratio]


@dataclass
class TransferSpec:
    """A framework spec as the user wrote it. ``None`` means "not given" (the framework's default applies).

    Values are kept exactly as given (``3`` stays ``3``, paths stay relative) so that ``to_dict`` returns
    the user's JSON unchanged; ``resolved()`` gives the effective, typed values.
    """

    name: str | None = None
    model_mode: str | None = None
    prompt: str | None = None
    prompt_path: str | None = None
    negative_prompt: str | None = None
    negative_prompt_file: str | None = None
    vision_path: str | None = None
    sound_path: str | None = None
    resolution: str | None = None
    aspect_ratio: str | None = None
    fps: int | None = None
    num_frames: int | None = None
    num_steps: int | None = None
    guidance: float | None = None
    guidance_interval: Sequence[float] | None = None
    shift: float | None = None
    sigma_max: float | None = None
    normalize_cfg: bool | None = None
    seed: int | None = None
    duration_template: str | None = None
    resolution_template: str | None = None
    inverse_duration_template: str | None = None
    inverse_resolution_template: str | None = None
    negative_metadata_mode: str | None = None
    negative_prompt_keep_metadata: bool | None = None
    control_guidance: float | None = None
    control_guidance_interval: Sequence[float] | None = None
    hints: dict[str, Hint] = field(default_factory=dict)
    num_video_frames_per_chunk: int | None = None
    num_conditional_frames: int | None = None
    num_first_chunk_conditional_frames: int | None = None
    max_frames: int | None = None
    share_vision_temporal_positions: bool | None = None
    emphasize_control_in_prompt: bool | None = None
    show_control_condition: bool | None = None
    show_input: bool | None = None
    video_save_quality: int | None = None
    base_dir: Path = field(default_factory=Path.cwd)
    _key_order: list[str] = field(default_factory=list, repr=False, compare=False)
    _nulls: set[str] = field(default_factory=set, repr=False, compare=False)

    # ------------------------------------------------------------------ load / save

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base_dir: str | os.PathLike[str] | None = None) -> TransferSpec:
        """Parse a spec dict; structure only (unknown keys, hint shapes). Call ``validate()`` for the rest."""
        if not isinstance(data, Mapping):
            raise ValidationError("spec", f"a spec must be a JSON object, got {type(data).__name__}.")
        spec = cls(base_dir=Path(base_dir).resolve() if base_dir is not None else Path.cwd())
        for key, value in data.items():
            if key in HINT_KINDS:
                if value is not None:
                    spec.hints[key] = Hint.from_dict(key, value)
                else:
                    spec._nulls.add(key)
            elif key in FIELD_TYPES:
                if value is None:
                    spec._nulls.add(key)
                else:
                    setattr(spec, key, value)
            else:
                suggestion = _close_match(key, list(FIELD_TYPES) + list(HINT_KINDS))
                if suggestion:
                    fix = f"did you mean {suggestion!r}?"
                else:
                    fix = f"remove it; control hints are {', '.join(HINT_KINDS)}."
                raise ValidationError(key, "unknown spec field (the framework would reject it).", fix)
            spec._key_order.append(key)
        return spec

    def to_dict(self, base_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """The spec as the user wrote it: only the fields they set, in their key order.

        Fields set in code after loading are appended in schema order. With ``base_dir`` (the folder the
        spec will be written to) different from ``self.base_dir``, relative paths are rewritten so they
        still point at the same files.
        """
        rebase = self._path_rebaser(Path(base_dir).resolve()) if base_dir is not None else None
        schema_order = list(FIELD_TYPES) + list(HINT_KINDS)
        order = self._key_order + [k for k in schema_order if k not in self._key_order]
        out: dict[str, Any] = {}
        for key in order:
            if key in HINT_KINDS:
                if key in self.hints:
                    out[key] = self.hints[key].to_dict(rebase)
                elif key in self._key_order and key in self._nulls:
                    out[key] = None
                continue
            value = getattr(self, key)
            if value is None:
                if key in self._key_order and key in self._nulls:
                    out[key] = None
                continue
            if isinstance(value, os.PathLike):
                value = os.fspath(value)
            if isinstance(value, tuple):
                value = list(value)
            if rebase is not None and key in PATH_FIELDS:
                value = rebase(value)
            out[key] = value
        return out

    def _path_rebaser(self, new_base: Path):
        old_base = Path(self.base_dir).resolve()

        def rebase(value: str) -> str:
            if new_base == old_base or _is_url(value) or Path(value).expanduser().is_absolute():
                return value
            target = old_base / value
            if Path(value).parent == Path(".") and not target.exists():
                return value
            return os.path.relpath(target, new_base)

        return rebase

    # ------------------------------------------------------------------ effective values

    @property
    def is_transfer(self) -> bool:
        return bool(self.hints)

    @property
    def hint_kinds(self) -> tuple[str, ...]:
        """Hints in canonical order (edge, blur, depth, seg, wsm): the order the framework packs them."""
        return tuple(k for k in HINT_KINDS if k in self.hints)

    def user_fields(self) -> tuple[str, ...]:
        """Top-level fields the user gave a (non-null) value, as the framework counts them."""
        return tuple(k for k in FIELD_TYPES if getattr(self, k) is not None)

    def effective_model_mode(self) -> str:
        """``model_mode`` if given, else the framework's inference from ``vision_path`` and ``num_frames``."""
        if self.model_mode is not None:
            return str(self.model_mode)
        source = "text"
        if self.vision_path:
            ext = Path(str(self.vision_path).split("?")[0]).suffix.lower()
            source = "image" if ext in IMAGE_EXTENSIONS else "video"
        return f"{source}2{'image' if self.num_frames == 1 else 'video'}"

    def _effective(self) -> tuple[dict[str, Any], dict[str, str]]:
        """Effective top-level values and their sources, without reading files or validating."""
        mode = self.effective_model_mode()
        values: dict[str, Any] = dict(MODALITY_DEFAULTS)
        sources = {k: f"{mode} default" for k in values}
        if mode in ("text2image", "image2image"):
            values["num_frames"] = 1
        for key in FIELD_TYPES:
            value = getattr(self, key)
            if value is not None:
                values[key] = value
                sources[key] = "spec"
            else:
                values.setdefault(key, None)
        values["model_mode"] = mode
        sources.setdefault("model_mode", "inferred")
        if self.hints:
            for key, default in TRANSFER_SAMPLE_DEFAULTS.items():
                if values.get(key) is None:
                    values[key] = default
                    sources[key] = "transfer default"
            if len(self.hints) == 1:
                kind = next(iter(self.hints))
                for key, default in HINT_TUNED_DEFAULTS[kind].items():
                    if getattr(self, key) is None:
                        values[key] = default
                        sources[key] = f"{kind} tuned default"
        if values.get("negative_prompt_keep_metadata") and values.get("negative_metadata_mode") == "none":
            values["negative_metadata_mode"] = "same"
            sources["negative_metadata_mode"] = "promoted to 'same' by negative_prompt_keep_metadata"
        return values, sources

    def resolved(self) -> ResolvedSpec:
        """Effective values: defaults applied, paths absolute, prompt texts loaded.

        Validates everything except file existence of media (prompt files are read, so must exist).
        """
        self.validate(check_files=False, tiers=TIERS)
        values, sources = self._effective()
        base = Path(self.base_dir)
        prompt, negative = self._load_prompts(base, sources)
        hints = tuple(
            ResolvedHint(
                kind=kind,
                control_path=_resolve_path(self.hints[kind].control_path, base),
                weight=float(self.hints[kind].weight) if self.hints[kind].weight is not None else 1.0,
                preset=(self.hints[kind].preset or "medium") if kind in PRESET_FIELDS else None,
            )
            for kind in self.hint_kinds
        )

        def interval(value: Any) -> tuple[float, float] | None:
            return None if value is None else (float(value[0]), float(value[1]))

        def optional_int(key: str) -> int | None:
            return None if values.get(key) is None else int(values[key])

        def optional_bool(key: str) -> bool | None:
            return None if values.get(key) is None else bool(values[key])

        return ResolvedSpec(
            name=values["name"],
            model_mode=values["model_mode"],
            prompt=prompt,
            negative_prompt=negative,
            vision_path=_resolve_path(values["vision_path"], base),
            sound_path=_resolve_path(values["sound_path"], base),
            resolution=normalize_tier(values["resolution"]),
            aspect_ratio=normalize_aspect(values["aspect_ratio"]),
            fps=int(values["fps"]),
            num_frames=int(values["num_frames"]),
            num_steps=int(values["num_steps"]),
            guidance=float(values["guidance"]),
            guidance_interval=interval(values["guidance_interval"]),
            shift=float(values["shift"]),
            sigma_max=float(values["sigma_max"]),
            normalize_cfg=bool(values["normalize_cfg"]),
            seed=optional_int("seed"),
            duration_template=values["duration_template"],
            resolution_template=values["resolution_template"],
            inverse_duration_template=values["inverse_duration_template"],
            inverse_resolution_template=values["inverse_resolution_template"],
            negative_metadata_mode=values["negative_metadata_mode"],
            negative_prompt_keep_metadata=bool(values["negative_prompt_keep_metadata"]),
            control_guidance=float(values["control_guidance"]),
            control_guidance_interval=interval(values["control_guidance_interval"]),
            hints=hints,
            num_video_frames_per_chunk=optional_int("num_video_frames_per_chunk"),
            num_conditional_frames=optional_int("num_conditional_frames"),
            num_first_chunk_conditional_frames=optional_int("num_first_chunk_conditional_frames"),
            max_frames=optional_int("max_frames"),
            share_vision_temporal_positions=optional_bool("share_vision_temporal_positions"),
            emphasize_control_in_prompt=optional_bool("emphasize_control_in_prompt"),
            show_control_condition=optional_bool("show_control_condition"),
            show_input=optional_bool("show_input"),
            video_save_quality=int(values["video_save_quality"]),
            base_dir=str(base),
            sources=MappingProxyType(sources),
        )

    def _load_prompts(self, base: Path, sources: dict[str, str]) -> tuple[str, str | None]:
        if self.prompt is not None:
            prompt = self.prompt
        elif self.prompt_path is not None:
            path = Path(_resolve_path(self.prompt_path, base) or "")
            if not path.is_file():
                raise ValidationError("prompt_path", f"file not found: {path}.", "fix the path (relative to the spec).")
            prompt = load_prompt_file(path, compact_json=self.is_transfer)
            sources["prompt"] = f"prompt_path {self.prompt_path}"
        else:
            prompt = ""
        if self.negative_prompt is not None:
            return prompt, self.negative_prompt
        if self.negative_prompt_file is not None:
            path = Path(_resolve_path(self.negative_prompt_file, base) or "")
            if path.is_file():
                sources["negative_prompt"] = f"negative_prompt_file {self.negative_prompt_file}"
                return prompt, json.dumps(_read_json(path, "negative_prompt_file"))
            name = Path(self.negative_prompt_file).name
            sources["negative_prompt"] = f"framework defaults/{name} (not readable here)"
            return prompt, None
        sources["negative_prompt"] = f"framework defaults/{FRAMEWORK_DEFAULT_NEGATIVE_FILE} (not readable here)"
        return prompt, None

    # ------------------------------------------------------------------ validation

    def validate(self, *, check_files: bool = True, tiers: Iterable[str] = FRAMEWORK_TIERS) -> TransferSpec:
        """Raise ``ValidationError`` for anything the framework would reject or silently misread.

        ``tiers`` defaults to the framework's inference tiers; pass ``presets.TIERS`` to allow this
        project's CPU tier for the diffusers path. ``check_files`` checks that local media files exist.
        """
        self._validate_types()
        self._validate_choices(tuple(tiers))
        values, _ = self._effective()
        self._validate_ranges(values)
        self._validate_transfer(values)
        if check_files:
            self._validate_files()
        return self

    def _validate_types(self) -> None:
        for key, kind in FIELD_TYPES.items():
            value = getattr(self, key)
            if value is not None:
                _check_type(key, value, kind)
        for hint in self.hints.values():
            if hint.kind not in HINT_KINDS:
                raise ValidationError(hint.kind, "unknown hint.", f"use one of {', '.join(HINT_KINDS)}.")
            if hint.control_path is not None:
                _check_type(f"{hint.kind}.control_path", hint.control_path, _STR)
            if hint.weight is not None:
                _check_type(f"{hint.kind}.weight", hint.weight, _FLOAT)
            if hint.preset is not None:
                if hint.kind not in PRESET_FIELDS:
                    raise ValidationError(
                        f"{hint.kind}.preset",
                        f"{hint.kind} maps cannot be computed, so {hint.kind} has no preset.",
                        "remove the preset.",
                    )
                _check_type(f"{hint.kind}.{PRESET_FIELDS[hint.kind]}", hint.preset, _STR)

    def _validate_choices(self, tiers: tuple[str, ...]) -> None:
        if self.model_mode is not None and self.model_mode not in MODEL_MODES:
            raise ValidationError(
                "model_mode",
                f"unknown or unsupported mode {self.model_mode!r}.",
                f"use one of {', '.join(MODEL_MODES)}.",
            )
        if self.resolution is not None and self.resolution not in tiers:
            normalized = normalize_tier(self.resolution)
            fix = f'write "{normalized}".' if normalized in tiers else f"use one of {', '.join(tiers)} (a string)."
            raise ValidationError("resolution", f"{self.resolution!r} is not a video tier of the framework.", fix)
        if self.aspect_ratio is not None and self.aspect_ratio not in SPEC_ASPECT_RATIOS:
            normalized = normalize_aspect(self.aspect_ratio)
            fix = f'write "{normalized}".' if normalized in SPEC_ASPECT_RATIOS else ""
            raise ValidationError(
                "aspect_ratio",
                f"{self.aspect_ratio!r} is not one of {', '.join(SPEC_ASPECT_RATIOS)}.",
                fix or f"use one of {', '.join(SPEC_ASPECT_RATIOS)}.",
            )
        if self.negative_metadata_mode is not None and self.negative_metadata_mode not in NEGATIVE_METADATA_MODES:
            raise ValidationError(
                "negative_metadata_mode",
                f"unknown mode {self.negative_metadata_mode!r}.",
                f"use one of {', '.join(NEGATIVE_METADATA_MODES)}.",
            )
        for hint in self.hints.values():
            if hint.kind in PRESET_FIELDS and hint.preset is not None:
                choices = _PRESET_CHOICES[hint.kind]
                if hint.preset not in choices:
                    raise ValidationError(
                        f"{hint.kind}.{PRESET_FIELDS[hint.kind]}",
                        f"unknown preset {hint.preset!r}.",
                        f"use one of {', '.join(choices)}.",
                    )

    def _validate_ranges(self, values: Mapping[str, Any]) -> None:
        _check_range("guidance", values["guidance"], 0.0, 7.0)
        _check_range("control_guidance", values["control_guidance"], 0.0, 10.0)
        _check_range("video_save_quality", values["video_save_quality"], 0, 10)
        for key in ("fps", "num_frames", "num_steps", "num_video_frames_per_chunk", "max_frames"):
            if values.get(key) is not None and values[key] < 1:
                raise ValidationError(key, f"must be a positive integer, got {values[key]}.", "use a value >= 1.")
        for key in ("num_conditional_frames", "num_first_chunk_conditional_frames", "seed"):
            if values.get(key) is not None and values[key] < 0:
                raise ValidationError(key, f"must be >= 0, got {values[key]}.", "use 0 or a positive integer.")
        for key in ("guidance_interval", "control_guidance_interval"):
            if values.get(key) is not None:
                lo, hi = values[key]
                if lo < 0 or hi < 0:
                    raise ValidationError(
                        key, f"timesteps must be >= 0, got {list(values[key])}.", "use [lo, hi] within 0..1000."
                    )
                if lo > hi:
                    raise ValidationError(
                        key,
                        f"lo > hi in {list(values[key])}: the interval is empty (active iff lo < t < hi).",
                        f"write [{hi}, {lo}].",
                    )
        if self.prompt is not None and self.prompt_path is not None:
            raise ValidationError("prompt_path", "both prompt and prompt_path are given.", "keep only one of them.")

    def _validate_transfer(self, values: Mapping[str, Any]) -> None:
        mode = values["model_mode"]
        if mode == "audio_image2video" and self.sound_path is None:
            raise ValidationError(
                "sound_path", "model_mode audio_image2video needs a conditioning audio clip.", "set sound_path."
            )
        if self.sound_path is not None and mode != "audio_image2video":
            raise ValidationError(
                "sound_path",
                f"sound_path is only used by model_mode audio_image2video (this spec is {mode}).",
                'set "model_mode": "audio_image2video" or remove sound_path.',
            )
        if not self.hints:
            for key in TRANSFER_ONLY_FIELDS:
                if getattr(self, key) is not None:
                    raise ValidationError(
                        key,
                        "is a transfer-only field but the spec has no control hint.",
                        f"add a hint ({', '.join(HINT_KINDS)}) or remove {key}.",
                    )
            if self.control_guidance is not None and float(self.control_guidance) != 1.0:
                raise ValidationError(
                    "control_guidance",
                    f"{self.control_guidance} needs a control hint (without one it would be ignored).",
                    f"add a hint ({', '.join(HINT_KINDS)}) or remove control_guidance.",
                )
            return
        if mode not in TRANSFER_MODEL_MODES:
            raise ValidationError(
                "model_mode",
                f"transfer cannot run as {mode}"
                + (" (inferred from num_frames 1)." if self.model_mode is None else "; it produces video."),
                'set "model_mode": "video2video"; the output length comes from the control, so image transfer '
                "needs a one-frame control, not num_frames 1.",
            )
        for kind in self.hint_kinds:
            hint = self.hints[kind]
            if kind not in COMPUTABLE_HINTS and hint.control_path is None:
                raise ValidationError(
                    f"{kind}.control_path",
                    f"{kind} maps cannot be computed from RGB; a precomputed control video is required.",
                    f"set {kind}.control_path to the {kind} video.",
                )
            if hint.control_path is None and self.vision_path is None:
                raise ValidationError(
                    f"{kind}.control_path",
                    f"the {kind} hint has neither a control_path nor a vision_path to compute it from.",
                    f"set {kind}.control_path or vision_path.",
                )
            if hint.weight is not None and (not math.isfinite(float(hint.weight)) or hint.weight < 0):
                raise ValidationError(
                    f"{kind}.weight", f"must be a finite number >= 0, got {hint.weight}.", "use e.g. 1.0."
                )
        weights = [1.0 if self.hints[k].weight is None else float(self.hints[k].weight) for k in self.hint_kinds]
        if sum(weights) <= 0:
            given = dict(zip(self.hint_kinds, weights, strict=True))
            raise ValidationError(
                "weight",
                f"all hint weights are zero ({given}); they are normalised by their sum.",
                "give at least one hint a positive weight.",
            )
        chunk = round_up_chunk(values["num_video_frames_per_chunk"])
        n_cond = values["num_conditional_frames"]
        if n_cond >= chunk:
            raise ValidationError(
                "num_conditional_frames",
                f"{n_cond} overlap frames leave no new frames in a {chunk}-frame chunk.",
                f"use fewer than {chunk} (usually 1), or a longer num_video_frames_per_chunk.",
            )
        if values["num_first_chunk_conditional_frames"] > 0 and self.vision_path is None:
            raise ValidationError(
                "num_first_chunk_conditional_frames",
                "first-chunk conditioning frames come from vision_path, which is not set.",
                "set vision_path or use 0.",
            )

    def _validate_files(self) -> None:
        base = Path(self.base_dir)
        checks = [(k, getattr(self, k)) for k in ("prompt_path", "vision_path", "sound_path")]
        checks += [(f"{k}.control_path", self.hints[k].control_path) for k in self.hint_kinds]
        for key, value in checks:
            if value is None or _is_url(value):
                continue
            path = Path(_resolve_path(value, base) or "")
            if not path.is_file():
                fix = "fix the path (relative paths are relative to the spec's folder)"
                if key in ("edge.control_path", "blur.control_path"):
                    fix += ", or remove control_path to compute the map from vision_path"
                raise ValidationError(key, f"file not found: {path}.", fix + ".")
        if self.negative_prompt_file is not None and not _is_url(self.negative_prompt_file):
            path = Path(_resolve_path(self.negative_prompt_file, base) or "")
            if not path.is_file():
                if Path(self.negative_prompt_file).parent != Path("."):
                    raise ValidationError("negative_prompt_file", f"file not found: {path}.", "fix the path.")
                warnings.warn(
                    f"negative_prompt_file {self.negative_prompt_file!r} is not next to the spec; the framework "
                    "will look for it in its own defaults/ folder.",
                    stacklevel=3,
                )


def _check_type(key: str, value: Any, kind: str) -> None:
    ok = {
        _STR: isinstance(value, str),
        _INT: (isinstance(value, int) and not isinstance(value, bool))
        or (isinstance(value, float) and value.is_integer()),
        _FLOAT: isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
        _BOOL: isinstance(value, bool),
        _INTERVAL: isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value),
    }[kind]
    if not ok:
        expected = {
            _STR: "a string",
            _INT: "an integer",
            _FLOAT: "a number",
            _BOOL: "true or false",
            _INTERVAL: "a [lo, hi] pair of timesteps",
        }[kind]
        raise ValidationError(key, f"must be {expected}, got {value!r}.", f"write {key} as {expected}.")


def _check_range(key: str, value: Any, lo: float, hi: float) -> None:
    if not lo <= value <= hi:
        raise ValidationError(key, f"{value} is outside {lo:g}..{hi:g}.", f"use a value in {lo:g}..{hi:g}.")


def _read_json(path: Path, field_name: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValidationError(field_name, f"{path} is not valid JSON ({exc}).", "fix the JSON.") from exc


def load_prompt_file(path: str | os.PathLike[str], *, compact_json: bool = True) -> str:
    """A prompt file's text: ``.json`` -> one compact JSON line (transfer specs), other files stripped.

    Compact separators keep the JSON prompt a single, stable line; the transfer prompt formatting
    re-serialises JSON-object prompts anyway, so the separators never reach the model.
    """
    path = Path(path)
    if path.suffix.lower() == ".json" and compact_json:
        return json.dumps(_read_json(path, "prompt_path"), separators=(",", ":"))
    return path.read_text(encoding="utf-8").strip()


def load_spec(path: str | os.PathLike[str], *, validate: bool = True) -> TransferSpec:
    """Read a spec JSON file; relative paths in it resolve against its folder."""
    path = Path(path)
    if not path.is_file():
        raise ValidationError("spec", f"file not found: {path}.", "check the spec path.")
    spec = TransferSpec.from_dict(_read_json(path, "spec"), base_dir=path.parent)
    return spec.validate() if validate else spec


def spec_json(spec: TransferSpec, base_dir: str | os.PathLike[str] | None = None) -> str:
    """The text ``write_spec`` writes: the user's keys and order, 2-space indent, trailing newline."""
    return json.dumps(spec.to_dict(base_dir), indent=2, ensure_ascii=False) + "\n"


def write_spec(spec: TransferSpec, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the spec atomically (temporary name + rename) next to ``path``.

    Relative paths are re-expressed relative to the new folder so they keep pointing at the same files.
    An existing file with different content is only replaced with ``overwrite=True``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = spec_json(spec, path.parent)
    if path.exists():
        if path.read_text(encoding="utf-8") == text:
            return path
        if not overwrite:
            raise OutputExistsError(f"{path} exists with different content; pass overwrite=True to replace it.")
    media.write_bytes_atomic(path, text.encode("utf-8"), overwrite=True)
    return path


# ---------------------------------------------------------------------- chunking


def chunk_length(total_frames: int, chunk: int) -> int:
    """The chunk the framework generates: 1 for a single frame, else ``chunk`` rounded up to 4k+1."""
    return 1 if total_frames == 1 else round_up_chunk(chunk)


def plan_chunks(total_frames: int, chunk: int, n_cond: int) -> list[tuple[int, int]]:
    """``[(start, end), ...]`` frame ranges of the autoregressive chunks (``inference/transfer.py``).

    Each range is sliced from the controls and mirror-padded to the chunk length; chunk c > 0 reuses the
    last ``n_cond`` frames of chunk c - 1, so consecutive ranges overlap by ``n_cond`` frames.
    """
    if total_frames < 1:
        raise ValidationError("total_frames", f"must be >= 1, got {total_frames}.", "pass a non-empty control.")
    if chunk < 1:
        raise ValidationError("num_video_frames_per_chunk", f"must be >= 1, got {chunk}.", "use e.g. 93.")
    if n_cond < 0:
        raise ValidationError("num_conditional_frames", f"must be >= 0, got {n_cond}.", "use e.g. 1.")
    length = chunk_length(total_frames, chunk)
    if total_frames <= length:
        return [(0, total_frames)]
    stride = length - n_cond
    if stride <= 0:
        raise ValidationError(
            "num_conditional_frames",
            f"{n_cond} overlap frames leave no new frames in a {length}-frame chunk.",
            f"use fewer than {length}.",
        )
    count = 1 + math.ceil((total_frames - length) / stride)
    return [(c * stride, min(c * stride + length, total_frames)) for c in range(count)]


# ---------------------------------------------------------------------- prompts


def _as_resolved(spec: TransferSpec | ResolvedSpec) -> ResolvedSpec:
    return spec if isinstance(spec, ResolvedSpec) else spec.resolved()


def _parse_json_object(prompt: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(prompt)
    except (TypeError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def _append_metadata(
    text: str,
    *,
    fps: int,
    num_frames: int,
    duration_template: str | None,
    resolution_template: str | None,
    height: int,
    width: int,
    force_duration: bool = False,
) -> str:
    text = text.strip()
    if duration_template is not None and (num_frames > 1 or force_duration):
        text = text.rstrip(".") + ". " + duration_template.format(duration=num_frames / fps, fps=fps)
    text = text.strip()
    if resolution_template is not None:
        text = text.rstrip(".") + ". " + resolution_template.format(height=height, width=width)
    return text


def control_directive(hint_kinds: Sequence[str]) -> str:
    """The sentence the framework appends to transfer prompts (hints in canonical order)."""
    names = ", ".join(k for k in HINT_KINDS if k in hint_kinds)
    return CONTROL_DIRECTIVE.format(hints=names)


def format_transfer_prompt(
    prompt: str,
    negative: str | None,
    spec: TransferSpec | ResolvedSpec,
    width: int,
    height: int,
    chunk_frames: int,
    fps: float,
) -> tuple[str, str | None]:
    """The (prompt, negative) text the framework tokenises for a transfer run.

    ``chunk_frames`` is the chunk length (not the video length) and ``fps`` the output fps (rounded to an
    integer here, as the framework does). A JSON-object prompt gets ``duration``/``fps``/``resolution``/
    ``aspect_ratio`` injected; a plain prompt gets the duration and resolution sentences. The negative is
    left alone, or gets the same / inverse sentences, per ``negative_metadata_mode``; an empty result is
    ``None`` (no negative). Finally the control directive is appended when ``emphasize_control_in_prompt``.
    """
    r = _as_resolved(spec)
    fps_int = round(float(fps))
    obj = _parse_json_object(prompt)
    if obj is not None:
        metadata: dict[str, Any] = {}
        if chunk_frames > 1:
            metadata["duration"] = f"{int(chunk_frames / fps_int) if fps_int > 0 else 0}s"
            metadata["fps"] = float(fps_int)
        else:
            obj.pop("duration", None)
            obj.pop("fps", None)
        metadata["resolution"] = {"H": int(height), "W": int(width)}
        if r.aspect_ratio is not None:
            metadata["aspect_ratio"] = r.aspect_ratio
        obj.update(metadata)
        text = json.dumps(obj)
    else:
        text = _append_metadata(
            prompt,
            fps=fps_int,
            num_frames=chunk_frames,
            duration_template=r.duration_template,
            resolution_template=r.resolution_template,
            height=height,
            width=width,
        )

    neg = negative
    if r.negative_metadata_mode in ("same", "inverse"):
        inverse = r.negative_metadata_mode == "inverse"
        neg = (
            _append_metadata(
                negative if negative is not None else "",
                fps=fps_int,
                num_frames=chunk_frames,
                duration_template=r.inverse_duration_template if inverse else r.duration_template,
                resolution_template=r.inverse_resolution_template if inverse else r.resolution_template,
                height=height,
                width=width,
                force_duration=inverse,
            )
            .lstrip(".")
            .strip()
        )
    neg = neg or None

    if r.emphasize_control_in_prompt and r.hints:
        text = text.rstrip() + " " + control_directive(r.hint_kinds)
    return text, neg


# ---------------------------------------------------------------------- control consistency


def check_control_consistency(
    spec: TransferSpec | ResolvedSpec,
    control_frames: Any,
    control_fps: float,
    *,
    input_fps: float | None = None,
    hint: str | None = None,
    emit: bool = True,
) -> list[str]:
    """Say what the framework will do when the first control disagrees with the spec.

    The framework takes the video length from the first control (``num_frames`` does not cap it), the
    output fps from ``vision_path`` if set (else spec ``fps``, never the control's), and, without
    ``vision_path``, the geometry from the control's own aspect while the prompt metadata keeps the spec's
    ``aspect_ratio``. ``control_frames`` is a frame count or the frames array ``[T, H, W, 3]``. Each warning
    is returned and, with ``emit``, also raised through ``warnings.warn``.
    """
    r = _as_resolved(spec)
    kind = hint or (r.hint_kinds[0] if r.hints else "control")
    shape = getattr(control_frames, "shape", None)
    count = int(shape[0]) if shape is not None else int(control_frames)
    messages: list[str] = []

    frames = count
    if r.max_frames is not None and count > r.max_frames:
        frames = r.max_frames
        messages.append(
            f"{kind} control has {count} frames, more than max_frames {r.max_frames}: the framework reads only the "
            f"first {r.max_frames}."
        )
    if frames != r.num_frames:
        messages.append(
            f"{kind} control has {frames} frames, spec asks {r.num_frames}: the output will have {frames} frames, "
            "as the framework does (the length comes from the first control; num_frames does not cap it)."
        )
    chunk = r.chunk_frames
    if chunk is not None and 1 < frames < chunk:
        messages.append(
            f"{kind} control has {frames} frames, fewer than the {chunk}-frame chunk: the controls are mirror-padded "
            f"to {chunk} frames and the output is trimmed back to {frames}."
        )
    if r.vision_path is not None:
        if input_fps is not None and control_fps and abs(float(input_fps) - float(control_fps)) > 1e-3:
            messages.append(
                f"{kind} control is {control_fps:g} fps but vision_path is {input_fps:g} fps: the output is written at "
                f"{input_fps:g} fps (from vision_path), as the framework does."
            )
    elif control_fps and abs(float(control_fps) - r.fps) > 1e-3:
        ratio = float(control_fps) / r.fps
        speed = f"{ratio:.3g}x slower" if ratio > 1 else f"{1 / ratio:.3g}x faster"
        messages.append(
            f"{kind} control is {control_fps:g} fps, spec fps is {r.fps}: the output is written at {r.fps} fps "
            f"(without vision_path the framework uses the spec fps), so it plays {speed} than the control."
        )
    if r.vision_path is None and shape is not None and len(shape) >= 3:
        detected = nearest_aspect(int(shape[2]), int(shape[1]))
        if detected != r.aspect_ratio:
            messages.append(
                f"{kind} control is {shape[2]}x{shape[1]} (aspect {detected}) but spec aspect_ratio is "
                f"{r.aspect_ratio}: without vision_path the framework sizes the output from the control ({detected}) "
                f'while the prompt metadata says {r.aspect_ratio}; set "aspect_ratio": "{detected}".'
            )
    if emit:
        for message in messages:
            warnings.warn(message, stacklevel=2)
    return messages


__all__ = [
    "BLUR_PRESETS",
    "COMPUTABLE_HINTS",
    "CONTROL_DIRECTIVE",
    "EDGE_PRESETS",
    "FRAMEWORK_TIERS",
    "HINT_KINDS",
    "HINT_TUNED_DEFAULTS",
    "MODALITY_DEFAULTS",
    "TRANSFER_ONLY_FIELDS",
    "TRANSFER_SAMPLE_DEFAULTS",
    "Hint",
    "ResolvedHint",
    "ResolvedSpec",
    "TransferSpec",
    "check_control_consistency",
    "chunk_length",
    "control_directive",
    "format_transfer_prompt",
    "load_prompt_file",
    "load_spec",
    "plan_chunks",
    "round_up_chunk",
    "spec_json",
    "write_spec",
]
