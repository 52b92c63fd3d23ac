"""Structured Cosmos3 captions: the framework's caption templates as JSON Schema, and captions built and checked
against it with every problem said in plain words: the field and the fix.

The framework's "JSON schemas" (``prompting_templates/external_api/*_json_schema.json``) are example-shaped: every
key a caption must carry, with a sentence describing its value, under its prompt templates' rules ("All top-level
keys must always be present", "Do not add keys beyond the template"); :func:`schema_from_template` makes them a real
JSON Schema, so what the upsampler is shown (and sends as ``response_format``) also validates what users write.
The generation metadata (``resolution``, ``aspect_ratio``, ``duration``, ``fps``) may be left out: every backend
overwrites it. When given, it is checked, ``resolution`` against the framework's size table for the aspect ratio.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from ..errors import ValidationError
from ..media import write_bytes_atomic
from ..prompts import load_caption
from ..protocol.prompting import FACTS
from ..views.pages import markdown_table

# caption kind -> the framework's default (external API) template, as prompt_upsampling.py pairs them
_FILES = FACTS["upsampler"]["template_files"]
KINDS: dict[str, str] = {"image": "external_api/" + _FILES["T2I_JSON_TEMPLATE"],
                         "video": "external_api/" + _FILES["T2V_JSON_TEMPLATE"]}
PROMPTS: dict[str, str] = {"image": "external_api/" + _FILES["T2I_PROMPT_TEMPLATE"],
                           "video": "external_api/" + _FILES["T2V_PROMPT_TEMPLATE"]}
# Generation metadata: the framework and vLLM-Omni overwrite these with the real values (prompts.with_metadata).
METADATA_KEYS: tuple[str, ...] = ("resolution", "aspect_ratio", "duration", "fps")
# the framework's RESOLUTION_RATIO_DICT, in its own order (the upsampler pastes this text into its prompt)
RESOLUTION_TABLE_TEXT: str = FACTS["upsampler"]["resolution_ratio_dict_text"]
RESOLUTION_TABLE: dict[str, dict[str, dict[str, int]]] = json.loads(RESOLUTION_TABLE_TEXT)
TIME_RANGE = r"^\d+:[0-5]\d-\d+:[0-5]\d$"
FREE_KEY = re.compile(r"^(key_name_\d+|<key_name>)$")
_ONE_OF = re.compile(r"^(?:must be )?one of:?\s*(?P<values>[^;]*)(?P<rest>.*)$", re.S)


def check_kind(kind: Any) -> str:
    if kind not in KINDS:
        raise ValidationError("kind", f"{kind!r} is not a caption kind.",
                              f"use one of {', '.join(map(repr, KINDS))} (text2image captions are 'image').")
    return kind


def template(kind: str) -> dict[str, Any]:
    """The framework's caption template for ``kind`` (a copy), as the upsampler shows it to the model."""
    return json.loads(FACTS["templates"][KINDS[check_kind(kind)]])


@lru_cache(maxsize=None)
def _schema(kind: str) -> dict[str, Any]:
    schema = schema_from_template(template(kind))
    schema["title"] = f"Cosmos3 {kind} caption"
    schema["description"] = (f"Derived from cosmos-framework {FACTS['commit']} "
                             f"{FACTS['upsampler']['templates_dir']}/{KINDS[kind].split('/')[-1]}")
    return schema


def caption_schema(kind: str = "video") -> dict[str, Any]:
    """The JSON Schema of a complete ``kind`` caption ("image" or "video"), every template key required."""
    return copy.deepcopy(_schema(check_kind(kind)))


def schema_from_template(node: Any) -> dict[str, Any]:
    """A JSON Schema for a value shaped like ``node`` in a framework caption template: an object has every key
    required and no others (a ``key_name_1`` / ``<key_name>`` key: free-form keys), a one-item list is a list of
    items of that shape, and a leaf's describing phrase sets its type and values (``'' if``: ``''`` allowed too)."""
    if isinstance(node, dict):
        if len(node) == 1 and FREE_KEY.match(next(iter(node))):
            return {"type": "object", "additionalProperties": {"type": "string"},
                    "description": next(iter(node.values()))}
        return {"type": "object", "properties": {key: schema_from_template(value) for key, value in node.items()},
                "required": list(node), "additionalProperties": False}
    if isinstance(node, list):
        if len(node) != 1:
            raise ValueError(f"a template list shows one item, got {len(node)}")
        return {"type": "array", "items": schema_from_template(node[0])}
    if not isinstance(node, str):
        raise ValueError(f"a template leaf is a describing string, got {node!r}")
    return _leaf(node)


def _leaf(text: str) -> dict[str, Any]:
    if text.startswith("int;") or text == "must follow resolution_ratio_dict":
        return {"type": "integer", "minimum": 0, "description": text}
    match = _ONE_OF.match(text)
    if match:
        quoted = re.findall(r"'([^']*)'", match["values"])
        if quoted:
            values: list[Any] = quoted + ([""] if "'' if" in match["rest"] and "" not in quoted else [])
            return {"type": "string", "enum": values, "description": text}
        numbers = [int(n) for n in re.findall(r"\d+", match["values"])]
        if numbers:
            return {"type": "integer", "enum": numbers, "description": text}
    if text.startswith("'M:SS-M:SS'"):
        return {"type": "string", "pattern": TIME_RANGE, "description": text}
    return {"type": "string", "description": text}


# Checking and building captions ---------------------------------------------------------------------------------------

_TYPE_WORDS = {"string": "text", "integer": "a whole number", "array": "a list", "object": "an object ({...})",
               "number": "a number", "boolean": "true or false", "null": "null"}
_VIDEO_ONLY = ("temporal_caption", "actions", "segments", "transitions", "audio_description", "duration", "fps")
_IMAGE_ONLY = ("comprehensive_t2i_caption", "quadrant_scan", "subject_details")


@dataclass(frozen=True)
class CaptionProblem:
    """One thing wrong with a caption: where (``subjects[0].gender``), what, and how to fix it."""

    path: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem} Fix: {self.fix}"


@dataclass
class CaptionCheck:
    """The outcome of :func:`check_caption`: ``ok``, the ``problems``, and ``missing`` (the required keys absent)."""

    kind: str
    caption: dict[str, Any]
    problems: list[CaptionProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def missing(self) -> list[str]:
        return [p.path for p in self.problems if p.problem.startswith("missing")]

    def explain(self) -> str:
        if self.ok:
            return f"a complete {self.kind} caption: every field the framework's template asks for, no others."
        head = f"{len(self.problems)} problem(s) in this {self.kind} caption:"
        return "\n".join([head, *(f"  - {p}" for p in self.problems)])

    def raise_if_invalid(self) -> dict[str, Any]:
        if not self.ok:
            raise ValidationError("caption", self.explain(), "correct the fields listed above "
                                  f"(the schema: cosmos_helpers.prompting.caption_schema({self.kind!r})).")
        return self.caption

    __str__ = explain

    def _repr_markdown_(self) -> str:
        if self.ok:
            return f"**OK**: {self.explain()}"
        rows = [{"field": f"`{p.path}`", "problem": p.problem.replace("\n", " "), "fix": p.fix} for p in self.problems]
        return (f"**{len(self.problems)} problem(s)** in this {self.kind} caption:\n\n"
                + markdown_table(rows, ("field", "problem", "fix")))


def guess_kind(caption: Mapping[str, Any]) -> str:
    """``"video"`` or ``"image"`` from fields only one of the two templates has; refuses to guess otherwise."""
    video = [key for key in _VIDEO_ONLY if key in caption]
    image = [key for key in _IMAGE_ONLY if key in caption]
    if bool(video) != bool(image):
        return "video" if video else "image"
    said = f"it has {video} (video) and {image} (image)" if video else "it has no field only one kind has"
    raise ValidationError("kind", f"cannot tell whether this is an image or a video caption: {said}.",
                          "pass kind='image' or kind='video'.")


def _as_dict(caption: Any) -> dict[str, Any]:
    if isinstance(caption, Path):
        caption = load_caption(caption, field="caption")
    if isinstance(caption, str):
        try:
            caption = json.loads(caption)
        except json.JSONDecodeError as exc:
            raise ValidationError("caption", f"this text is not a JSON caption ({exc.msg} at column {exc.colno}).",
                                  "pass a dict, a JSON object string, or a plain sentence to upsample_prompt()."
                                  ) from None
    if not isinstance(caption, Mapping):
        raise ValidationError("caption", f"expected a JSON object (a dict), got {type(caption).__name__}.",
                              "build it with build_caption(kind, ...) or load it from a .json file.")
    return dict(caption)


def check_caption(caption: Any, kind: str | None = None, *, require_metadata: bool = False) -> CaptionCheck:
    """Check ``caption`` (a dict, a JSON string or a ``Path``) against the framework's ``kind`` template (default: a
    guess from the fields); ``require_metadata`` also asks for the metadata the backends otherwise fill in."""
    import jsonschema

    data = _as_dict(caption)
    kind = check_kind(kind) if kind is not None else guess_kind(data)
    schema = caption_schema(kind)
    if not require_metadata:
        schema["required"] = [key for key in schema["required"] if key not in METADATA_KEYS]
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    problems = [problem for error in errors for problem in _explain(error, kind)] + _resolution_problems(data)
    return CaptionCheck(kind, data, list(dict.fromkeys(problems)))  # one "required" error per missing key


def build_caption(kind: str = "video", data: Mapping[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A caption from a dict and/or keyword arguments, checked (a ``ValidationError`` lists every problem); a key
    given both in ``data`` and as a keyword is refused rather than one silently winning."""
    base = _as_dict(data) if data is not None else {}
    both = sorted(set(base) & set(fields))
    if both:
        raise ValidationError(both[0], "given both in the dict and as a keyword argument.", "give each field once.")
    return check_caption({**base, **fields}, kind).raise_if_invalid()


def save_caption(caption: Mapping[str, Any], path: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``caption`` as a ``.json`` prompt file; in a folder (``path`` ending in ``/`` or naming one) as
    ``<kind>_caption_<8 hex of its content>.json``, so each distinct caption gets its own file. The same caption
    already there is kept; a different one is never replaced unless ``overwrite``."""
    data = (json.dumps(dict(caption), indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    target = Path(path)
    if str(path).endswith(("/", "\\")) or target.is_dir():
        stem = "caption"
        with contextlib.suppress(ValidationError):
            stem = f"{guess_kind(caption)}_caption"
        target = target / f"{stem}_{hashlib.sha256(data).hexdigest()[:8]}.json"
    if target.is_file() and not overwrite:
        with contextlib.suppress(ValueError, UnicodeDecodeError):  # not JSON: not this caption, refused below
            if json.loads(target.read_text(encoding="utf-8")) == dict(caption):
                return target
    return write_bytes_atomic(target, data, overwrite=overwrite)


def blank_caption(kind: str = "video") -> dict[str, Any]:
    """The framework's template for ``kind`` with every value emptied: a form to fill in (``""``, ``0``, ``[]``)."""

    def empty(node: Any) -> Any:
        if isinstance(node, dict):
            if len(node) == 1 and FREE_KEY.match(next(iter(node))):
                return {}
            return {key: empty(value) for key, value in node.items()}
        if isinstance(node, list):
            return []
        return 0 if node.startswith("int;") else ""

    caption = empty(template(kind))
    for key in METADATA_KEYS:
        caption.pop(key, None)
    return caption


# Plain words ---------------------------------------------------------------------------------------------


def _path(parts: Any) -> str:
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in parts)
    return text.removeprefix(".") or "caption"


def _describe(schema: Mapping[str, Any]) -> str:
    if schema.get("type") == "object" and "properties" in schema:
        return "an object with " + ", ".join(schema["properties"])
    if schema.get("type") == "array":
        return "a list of " + _describe(schema.get("items", {}))
    return str(schema.get("description") or _TYPE_WORDS.get(schema.get("type"), "a value"))


def _explain(error: Any, kind: str) -> list[CaptionProblem]:
    where = _path(error.absolute_path)
    schema, value = error.schema, error.instance
    if error.validator == "required":
        properties = schema.get("properties", {})
        missing = [key for key in schema["required"] if isinstance(value, dict) and key not in value]
        return [CaptionProblem(_path([*error.absolute_path, key]), "missing.",
                               f"add it: {_describe(properties.get(key, {}))}.") for key in missing]
    if error.validator == "additionalProperties":
        known = list(schema.get("properties", {}))
        extra = [key for key in value if key not in known]
        return [CaptionProblem(_path([*error.absolute_path, key]), f"is not a field of the framework's {kind} "
                               "caption template.", _did_you_mean(key, known)) for key in extra]
    if error.validator == "type":
        wanted = _TYPE_WORDS.get(error.validator_value, error.validator_value)
        return [CaptionProblem(where, f"expected {wanted}, got {_kind_of(value)} {_short(value)}.",
                               f"give {wanted}: {_describe(schema)}.")]
    if error.validator == "enum":
        choices = ", ".join(repr(v) for v in error.validator_value)
        return [CaptionProblem(where, f"{_short(value)} is not an allowed value.", f"use one of {choices}.")]
    if error.validator == "pattern":
        return [CaptionProblem(where, f"{_short(value)} is not a time range M:SS-M:SS.", "write e.g. '0:00-0:05'.")]
    if error.validator == "minimum":
        return [CaptionProblem(where, f"{value} is below {error.validator_value}.", "use a count of 0 or more.")]
    return [CaptionProblem(where, error.message + ".", f"give {_describe(schema)}.")]


def _resolution_problems(data: Mapping[str, Any]) -> list[CaptionProblem]:
    resolution, aspect = data.get("resolution"), data.get("aspect_ratio")
    if not (isinstance(resolution, dict) and isinstance(aspect, str) and {"H", "W"} <= set(resolution)):
        return []
    pairs = {tier: sizes[aspect] for tier, sizes in RESOLUTION_TABLE.items() if aspect in sizes}  # {tier: {H, W}}
    if not pairs or {"H": resolution["H"], "W": resolution["W"]} in pairs.values():
        return []
    options = "; ".join(f"{tier}p: {{'H': {p['H']}, 'W': {p['W']}}}" for tier, p in pairs.items())
    return [CaptionProblem("resolution", f"H={resolution['H']}, W={resolution['W']} is not a size the framework "
                           f"uses for aspect_ratio {aspect!r}.", f"use one of {options}; or leave resolution out "
                           "and let the backend fill in the request's size.")]


def _did_you_mean(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}? Rename it, or remove it."
    return "remove it; the fields here are " + ", ".join(known) + "."


def _kind_of(value: Any) -> str:
    return {str: "text", int: "a whole number", float: "a number", bool: "true/false", list: "a list",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
