"""The fields of a framework input sample, typed as the framework types them, and readable errors for bad ones.

``SampleFields`` is this project's own pydantic model of the framework's ``OmniSampleOverrides`` (cosmos-framework
5eee9ed ``inference/args.py``): the same field names, JSON types, enums and bounds, every field optional, any
other key forbidden. ``tests/contracts`` checks its JSON schema field by field against the real one, so an input
this model accepts is one the framework accepts, and the reverse. Values are validated the way JSON is typed
(``"yes"`` is not a boolean, ``720`` is not the tier ``"720"``); errors become one
:class:`~cosmos_helpers.errors.ValidationError` naming the field (``edge.weight``) with what to write instead.
"""

from __future__ import annotations

import difflib
import json
from typing import Annotated, Any, Literal, Mapping

import pydantic
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, WithJsonSchema

from ..errors import ValidationError
from ..presets import normalize_aspect, normalize_tier
from ..protocol import framework as fw

FilePath = Annotated[str, WithJsonSchema({"type": "string", "format": "file-path"})]
DirPath = Annotated[str, WithJsonSchema({"type": "string", "format": "path"})]
Positive = Annotated[int, Field(gt=0)]
NonNegative = Annotated[int, Field(ge=0)]
Interval = tuple[NonNegativeFloat, NonNegativeFloat]


class _Strict(BaseModel):
    """JSON typing, no extra keys: the framework's ``extra="forbid"``."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class HintFields(_Strict):
    """A depth, seg or wsm hint (``TransferOverrides``)."""

    control_path: str | None = None
    weight: float | None = None


class EdgeHintFields(HintFields):
    preset_edge_threshold: Literal[fw.EDGE_PRESETS] | None = None


class BlurHintFields(HintFields):
    preset_blur_strength: Literal[fw.BLUR_PRESETS] | None = None


HINT_MODELS: Mapping[str, type[HintFields]] = {
    "edge": EdgeHintFields, "blur": BlurHintFields, "depth": HintFields, "seg": HintFields, "wsm": HintFields}


class SampleFields(_Strict):
    """One sample of an input file, as written (``None`` = not given: the framework's default applies)."""

    # sample
    name: str | None = None
    model: str | None = None
    extra: dict[str, Any] | None = None
    seed: int | None = None
    num_outputs: Positive | None = None
    output_dir: DirPath | None = None
    tensors_file: FilePath | None = None
    pickle_file: FilePath | None = None
    defaults_file: FilePath | None = None
    model_mode: Literal[fw.MODEL_MODES] | None = None
    # text
    prompt: str | None = None
    prompt_path: FilePath | None = None
    negative_prompt: str | None = None
    negative_prompt_file: str | None = None
    duration_template: str | None = None
    resolution_template: str | None = None
    negative_metadata_mode: Literal["none", "same", "inverse"] | None = None
    inverse_duration_template: str | None = None
    inverse_resolution_template: str | None = None
    negative_prompt_keep_metadata: bool | None = None
    # vision
    vision_path: str | None = None
    condition_frame_indexes_vision: list[int] | None = None
    condition_video_keep: Literal["first", "last"] | None = None
    resolution: Literal[fw.TIERS] | None = None
    aspect_ratio: Literal[fw.ASPECT_RATIOS] | None = None
    fps: Annotated[int, Field(ge=1)] | None = None
    num_frames: Positive | None = None
    video_save_quality: Annotated[int, Field(ge=0, le=10)] | None = None
    image_save_quality: Annotated[int, Field(ge=0, le=100)] | None = None
    # sampling
    num_steps: Positive | None = None
    guidance: Annotated[float, Field(ge=0, le=7)] | None = None
    guidance_interval: Interval | None = None
    normalize_cfg: bool | None = None
    shift: float | None = None
    sigma_max: float | None = None
    # sound
    enable_sound: bool | None = None
    sound_path: str | None = None
    # transfer
    control_guidance: Annotated[float, Field(ge=0, le=10)] | None = None
    control_guidance_interval: Interval | None = None
    edge: EdgeHintFields | None = None
    blur: BlurHintFields | None = None
    depth: HintFields | None = None
    seg: HintFields | None = None
    wsm: HintFields | None = None
    num_video_frames_per_chunk: Positive | None = None
    num_conditional_frames: NonNegative | None = None
    max_frames: Positive | None = None
    show_control_condition: bool | None = None
    show_input: bool | None = None
    num_first_chunk_conditional_frames: NonNegative | None = None
    share_vision_temporal_positions: bool | None = None
    emphasize_control_in_prompt: bool | None = None
    # action
    action_path: str | None = None
    domain_name: str | None = None
    image_size: Positive | None = None
    action_chunk_size: Positive | None = None
    raw_action_dim: Positive | None = None
    view_point: str | None = None
    # reasoner
    max_new_tokens: Positive | None = None
    do_sample: bool | None = None
    temperature: Annotated[float, Field(gt=0, le=100)] | None = None
    top_k: Positive | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0)] | None = None
    presence_penalty: float | None = None
    video_fps: Annotated[float, Field(gt=0)] | None = None
    # prompt upsampling
    prompt_upsampling: bool | None = None
    prompt_upsampler_max_tokens: Positive | None = None
    prompt_upsampler_temperature: Annotated[float, Field(ge=0)] | None = None
    prompt_upsampler_top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    prompt_upsampler_top_k: NonNegative | None = None
    prompt_upsampler_repetition_penalty: Annotated[float, Field(gt=0)] | None = None
    prompt_upsampler_presence_penalty: float | None = None
    prompt_upsampler_seed: int | None = None


# Keys people write for a hint's fields (vLLM-Omni's names, shorthands) and what the framework calls them.
_HINT_ALIASES: Mapping[str, str] = {"control_weight": "weight", "path": "control_path"}


def parse_fields(data: Any, *, where: str = "") -> SampleFields:
    """Validate one sample object; the first problem becomes a ``ValidationError`` naming its field."""
    if not isinstance(data, Mapping):
        raise ValidationError(where or "input", f"a sample must be a JSON object, got {type(data).__name__}.",
                              "write one {...} object per sample (a list of them, or one per line in .jsonl).")
    try:
        return SampleFields.model_validate_json(json.dumps(data, allow_nan=True))
    except pydantic.ValidationError as exc:
        error = min(exc.errors(), key=lambda e: (len(e["loc"]), str(e["loc"])))
        raise _field_error(error, data, where) from None


def _field_error(error: dict[str, Any], data: Mapping[str, Any], where: str) -> ValidationError:
    loc = [str(part) for part in error["loc"] if not isinstance(part, int)]
    if error["loc"] and isinstance(error["loc"][-1], int):  # an item of a list or pair: name the field
        loc = loc or [str(error["loc"][0])]
    field = ".".join(loc)
    value = error.get("input")
    prefix = f"{where}: " if where else ""
    kind = error["type"]
    if kind == "extra_forbidden":
        return ValidationError(field, f"{prefix}unknown field (the framework rejects any key it does not know).",
                               _unknown_fix(loc))
    if kind == "literal_error":
        choices = error.get("ctx", {}).get("expected", "")
        return ValidationError(field, f"{prefix}{value!r} is not one of {choices}.", _literal_fix(loc[-1], value))
    expected = {"int_type": "an integer", "float_type": "a number", "bool_type": "true or false",
                "string_type": "a string", "dict_type": "a JSON object", "list_type": "a list",
                "tuple_type": "a [lo, hi] pair", "model_type": "a JSON object", "finite_number": "a finite number"}
    if kind in expected:
        if loc and loc[-1] in fw.HINT_KINDS and kind == "model_type":
            fix = f'write "{loc[-1]}": {{"control_path": "..."}} (or {{}} to compute it from vision_path).'
        else:
            fix = f"write {field} as {expected[kind]}."
        return ValidationError(field, f"{prefix}must be {expected[kind]}, got {value!r}.", fix)
    if kind in ("too_short", "too_long", "missing"):
        return ValidationError(field, f"{prefix}must be a [lo, hi] pair of timesteps, got {value!r}.",
                               "write two numbers, e.g. [100, 900].")
    bounds = error.get("ctx", {})
    return ValidationError(field, f"{prefix}{value!r}: {error['msg'].lower()}.",
                           f"use a value {_bounds_text(bounds)}." if bounds else f"fix {field}.")


def _unknown_fix(loc: list[str]) -> str:
    name = loc[-1]
    if len(loc) == 2 and loc[0] in HINT_MODELS:
        allowed = list(HINT_MODELS[loc[0]].model_fields)
        suggestion = fw.PRESET_FIELDS.get(loc[0]) if name == "preset" else _HINT_ALIASES.get(name)
        suggestion = suggestion if suggestion in allowed else close_match(name, allowed)
        lead = f"did you mean {suggestion!r}? " if suggestion else ""
        return f"{lead}{loc[0]} accepts {', '.join(allowed)}."
    suggestion = close_match(name, sorted(fw.ALL_FIELDS))
    if suggestion:
        return f"did you mean {suggestion!r}?"
    return f"remove it (control hints are {', '.join(fw.HINT_KINDS)}; the fields are the framework's " \
           "OmniSampleOverrides)."


def _literal_fix(name: str, value: Any) -> str:
    if name == "resolution":
        tier = normalize_tier(value)
        return f'write "{tier}" (a string).' if tier in fw.TIERS else f"use one of {', '.join(fw.TIERS)} (a string)."
    if name == "aspect_ratio" and isinstance(value, str):
        aspect = normalize_aspect(value)
        if aspect in fw.ASPECT_RATIOS:
            return f'write "{aspect}".'
    return "use one of the values above."


def _bounds_text(bounds: Mapping[str, Any]) -> str:
    words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    return " and ".join(f"{words[k]} {v}" for k, v in bounds.items() if k in words) or "in range"


def close_match(name: str, candidates: list[str]) -> str | None:
    matches = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return matches[0] if matches else None


__all__ = ["BlurHintFields", "EdgeHintFields", "HINT_MODELS", "HintFields", "SampleFields", "close_match",
           "parse_fields"]
