"""The Cosmos3 caption contract as JSON Schema, derived from the framework's own caption templates.

The framework's "JSON schemas" (``prompting_templates/external_api/*_json_schema.json``) are example-shaped:
every key a caption must carry, each with a sentence describing its value. Their prompt templates state the
rules ("All top-level keys must always be present", "Do not add keys beyond the template"). This module turns
such a template into a real JSON Schema with one rule per phrase, so the same file the upsampler is shown
also validates what users write:

* an object: every key required, no others (a ``key_name_1`` / ``<key_name>`` key means "free-form keys");
* a one-item list: a list of items of that shape;
* ``"int; ..."`` and ``"must follow resolution_ratio_dict"``: a whole number, 0 or more;
* ``"one of 'A', 'B'"`` / ``"must be one of: ..."``: those values (plus ``''`` when the text says ``'' if``);
* ``"'M:SS-M:SS' ..."``: that time-range form; anything else: text.

The derived schema is also what the upsampler sends as ``response_format`` so a vLLM server constrains its
output to it.
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from typing import Any

from ..errors import ValidationError
from ..protocol.prompting import FACTS

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
    """A JSON Schema for a value shaped like ``node`` in a framework caption template (rules: module docstring)."""
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


def resolution_pairs(aspect_ratio: str) -> dict[str, dict[str, int]]:
    """``{tier: {"H", "W"}}`` the framework allows for ``aspect_ratio`` (its ``RESOLUTION_RATIO_DICT``)."""
    return {tier: sizes[aspect_ratio] for tier, sizes in RESOLUTION_TABLE.items() if aspect_ratio in sizes}
