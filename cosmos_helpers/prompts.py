"""Structured JSON captions: loading, compact serialisation and the metadata the backends inject.

Cosmos3 was trained on long structured captions. Upstream sends them as *compact* JSON strings; the
framework and vLLM-Omni additionally overwrite ``resolution``, ``aspect_ratio``, ``duration`` and ``fps``
with the real generation values and re-serialise with ``json.dumps``' default separators. Doing that
here, once, is what makes the same request give the same tokens on every backend.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Union

from .errors import ValidationError

Caption = Union[str, dict]
PromptLike = Union[str, dict, Path]


def load_caption(source: PromptLike, *, field: str = "prompt") -> Caption:
    """Read a caption from a ``.json`` / ``.txt`` file, or pass a string or dict through.

    A string naming an existing ``.json`` or ``.txt`` file is read too, so papermill parameters can carry
    either a path or the text itself.
    """
    if isinstance(source, dict):
        return source
    if isinstance(source, Path) or (isinstance(source, str) and _looks_like_prompt_file(source)):
        path = Path(source)
        if not path.is_file():
            raise ValidationError(field, f"prompt file {path} does not exist.",
                                  "give an existing .json/.txt file, or the prompt text itself.")
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".json":
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValidationError(field, f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}).",
                                      "fix the JSON, or save plain text with a .txt suffix.") from None
            if isinstance(value, (dict, str)):
                return value
            raise ValidationError(field, f"{path} holds a JSON {type(value).__name__}, not an object or string.",
                                  "store the caption as one JSON object.")
        return text.strip()
    if isinstance(source, str):
        return source
    raise ValidationError(field, f"expected text, a dict caption or a file path, got {type(source).__name__}.",
                          "pass a str, dict or pathlib.Path.")


def _looks_like_prompt_file(text: str) -> bool:
    stripped = text.strip()
    return "\n" not in stripped and len(stripped) < 4096 and stripped.lower().endswith((".json", ".txt"))


def compact(caption: Caption) -> str:
    """The wire form upstream uses: ``json.dumps`` with ``(",", ":")`` separators, ASCII only."""
    if isinstance(caption, dict):
        return json.dumps(caption, separators=(",", ":"), ensure_ascii=True)
    return caption


def parse_caption(text: str) -> Caption:
    """A string that is a JSON object becomes a dict; anything else stays text."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            return text
        if isinstance(value, dict):
            return value
    return text


def is_structured(caption: Caption) -> bool:
    return isinstance(caption, dict) or isinstance(parse_caption(caption), dict)


def with_metadata(caption: dict, *, width: int, height: int, num_frames: int, fps: float, aspect_ratio: str) -> str:
    """Overwrite the generation metadata of a JSON caption as the framework and vLLM-Omni do.

    Images drop ``duration``/``fps``. Serialised with default separators: that exact byte layout is what
    those backends tokenise.
    """
    data = dict(caption)
    data["resolution"] = {"H": int(height), "W": int(width)}
    data["aspect_ratio"] = aspect_ratio
    if num_frames > 1:
        data["duration"] = f"{int(num_frames / fps)}s"
        data["fps"] = float(fps)
    else:
        data.pop("duration", None)
        data.pop("fps", None)
    return json.dumps(data)


def caption_summary(caption: Caption, limit: int = 180) -> str:
    """A one-line human summary of a caption, for previews and galleries."""
    value = parse_caption(caption) if isinstance(caption, str) else caption
    if isinstance(value, dict):
        for key in ("comprehensive_t2i_caption", "temporal_caption", "background_setting"):
            if isinstance(value.get(key), str) and value[key].strip():
                text = value[key].strip()
                break
        else:
            text = compact(value)
    else:
        text = value.strip()
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
