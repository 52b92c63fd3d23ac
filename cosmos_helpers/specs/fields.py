"""The fields of a framework input sample, typed as the framework types them, and readable errors for bad ones.

``SampleFields`` models the framework's ``OmniSampleOverrides`` (cosmos-framework 5eee9ed ``inference/args.py``):
the fields of ``protocol.framework.SAMPLE_FIELDS`` with the same JSON types, enums and bounds, all optional, any
other key forbidden; ``tests/contracts`` checks its JSON schema against the real one field by field. Values are
typed as JSON is (``"yes"`` is not a boolean, ``720`` not the tier ``"720"``).
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


class _Strict(BaseModel):  # JSON typing, no extra keys: the framework's ``extra="forbid"``
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


# The JSON type of each hint field (``protocol.framework.HINT_FIELDS``) and of each hint's preset field.
_HINT_TYPES: Mapping[str, Any] = {"control_path": str, "weight": float}
_PRESET_CHOICES: Mapping[str, tuple[str, ...]] = {"edge": fw.EDGE_PRESETS, "blur": fw.BLUR_PRESETS}


def _hint_model(name: str, preset_field: str | None = None, choices: tuple[str, ...] = ()) -> type[_Strict]:
    fields: dict[str, Any] = {key: (_HINT_TYPES[key] | None, None) for key in fw.HINT_FIELDS}
    if preset_field:
        fields[preset_field] = (Literal[choices] | None, None)
    return pydantic.create_model(name, __base__=_Strict, __doc__=f"A {name.removesuffix('Fields')} hint.", **fields)


HintFields = _hint_model("HintFields")
HINT_MODELS: Mapping[str, type[_Strict]] = {
    kind: _hint_model(f"{kind.capitalize()}HintFields", fw.PRESET_FIELDS[kind], _PRESET_CHOICES[kind])
    if kind in fw.PRESET_FIELDS else HintFields for kind in fw.HINT_KINDS}

# The JSON type of every field of ``protocol.framework.SAMPLE_FIELDS`` that is not plain text (a string).
_TYPES: Mapping[str, Any] = {
    "extra": dict[str, Any], "seed": int, "num_outputs": Positive, "output_dir": DirPath, "tensors_file": FilePath,
    "pickle_file": FilePath, "defaults_file": FilePath, "model_mode": Literal[fw.MODEL_MODES],
    "prompt_path": FilePath, "negative_metadata_mode": Literal["none", "same", "inverse"],
    "negative_prompt_keep_metadata": bool,
    "condition_frame_indexes_vision": list[int], "condition_video_keep": Literal["first", "last"],
    "resolution": Literal[fw.TIERS], "aspect_ratio": Literal[fw.ASPECT_RATIOS], "fps": Annotated[int, Field(ge=1)],
    "num_frames": Positive, "video_save_quality": Annotated[int, Field(ge=0, le=10)],
    "image_save_quality": Annotated[int, Field(ge=0, le=100)],
    "num_steps": Positive, "guidance": Annotated[float, Field(ge=0, le=7)], "guidance_interval": Interval,
    "normalize_cfg": bool, "shift": float, "sigma_max": float,
    "enable_sound": bool,
    "control_guidance": Annotated[float, Field(ge=0, le=10)], "control_guidance_interval": Interval,
    **HINT_MODELS, "num_video_frames_per_chunk": Positive, "num_conditional_frames": NonNegative,
    "max_frames": Positive, "show_control_condition": bool, "show_input": bool,
    "num_first_chunk_conditional_frames": NonNegative, "share_vision_temporal_positions": bool,
    "emphasize_control_in_prompt": bool,
    "image_size": Positive, "action_chunk_size": Positive, "raw_action_dim": Positive,
    "max_new_tokens": Positive, "do_sample": bool, "temperature": Annotated[float, Field(gt=0, le=100)],
    "top_k": Positive, "top_p": Annotated[float, Field(gt=0, le=1)],
    "repetition_penalty": Annotated[float, Field(gt=0)], "presence_penalty": float,
    "video_fps": Annotated[float, Field(gt=0)],
    "prompt_upsampling": bool, "prompt_upsampler_max_tokens": Positive,
    "prompt_upsampler_temperature": Annotated[float, Field(ge=0)],
    "prompt_upsampler_top_p": Annotated[float, Field(ge=0, le=1)], "prompt_upsampler_top_k": NonNegative,
    "prompt_upsampler_repetition_penalty": Annotated[float, Field(gt=0)],
    "prompt_upsampler_presence_penalty": float, "prompt_upsampler_seed": int,
}

SampleFields: type[_Strict] = pydantic.create_model(
    "SampleFields", __base__=_Strict, __doc__="One sample of an input file, as written (None = not given).",
    **{name: (_TYPES.get(name, str) | None, None) for group in fw.SAMPLE_FIELDS.values() for name in group})


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
        raise _field_error(error, where) from None


def _field_error(error: dict[str, Any], where: str) -> ValidationError:
    # an item of a list or pair is named by its field
    loc = [str(part) for part in error["loc"] if not isinstance(part, int)] or [str(p) for p in error["loc"][:1]]
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
    if suggestion := close_match(name, sorted(fw.ALL_FIELDS)):
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
    return next(iter(difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)), None)
