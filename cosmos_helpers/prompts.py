"""Structured JSON captions: loading, compact serialisation and the metadata the backends inject.

Cosmos3 was trained on long structured captions. Upstream sends them as *compact* JSON strings; the
framework and vLLM-Omni additionally overwrite ``resolution``, ``aspect_ratio``, ``duration`` and ``fps``
with the real generation values and re-serialise with ``json.dumps``' default separators. Doing that
here, once, is what makes the same request give the same tokens on every backend.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Union

from .errors import ValidationError

Caption = Union[str, dict]
PromptLike = Union[str, dict, Path]


def load_caption(source: PromptLike, *, field: str = "prompt") -> Caption:
    """A caption from a ``pathlib.Path`` (``.json`` -> dict or string, else stripped text), or a string or dict as it
    is: only a ``Path`` means a file, so ``"render config.json"`` is a prompt (papermill: ``Path(prompt_file)``)."""
    if isinstance(source, (dict, str)):
        return source
    if not isinstance(source, Path):
        raise ValidationError(field, f"expected text, a dict caption or a pathlib.Path, got {type(source).__name__}.",
                              "pass a str (the prompt itself), a dict, or Path('caption.json') to read a file.")
    if not source.is_file():
        raise ValidationError(field, f"prompt file {source} does not exist.",
                              f"give an existing .json/.txt file (relative paths start at {Path.cwd()}).")
    text = source.read_text(encoding="utf-8")
    if source.suffix.lower() != ".json":
        return text.strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(field, f"{source} is not valid JSON ({exc.msg} at line {exc.lineno}).",
                              "fix the JSON, or save plain text with a .txt suffix.") from None
    if isinstance(value, (dict, str)):
        return value
    raise ValidationError(field, f"{source} holds a JSON {type(value).__name__}, not an object or string.",
                          "store the caption as one JSON object.")


def compact(caption: Caption) -> str:
    """The wire form upstream uses: ``json.dumps`` with ``(",", ":")`` separators, ASCII only."""
    if isinstance(caption, dict):
        return json.dumps(caption, separators=(",", ":"), ensure_ascii=True)
    return caption


def parse_caption(text: Caption) -> Caption:
    """A string that is a JSON object becomes a dict; anything else stays as it is."""
    if isinstance(text, str) and text.strip().startswith("{"):
        with contextlib.suppress(json.JSONDecodeError):
            if isinstance(value := json.loads(text), dict):
                return value
    return text


def with_metadata(caption: dict, *, width: int, height: int, num_frames: int, fps: float,
                  aspect_ratio: str | None) -> str:
    """The JSON caption with its metadata overwritten and serialised as the module docstring says, byte for byte as
    those backends tokenise it (images drop ``duration`` and ``fps``; the framework passes an integer ``fps``)."""
    data = dict(caption)
    if num_frames > 1:
        data.update(duration=f"{int(num_frames / fps) if fps > 0 else 0}s", fps=float(fps))
    else:
        data.pop("duration", None)
        data.pop("fps", None)
    data["resolution"] = {"H": int(height), "W": int(width)}
    if aspect_ratio is not None:
        data["aspect_ratio"] = aspect_ratio
    return json.dumps(data)


def with_templates(text: str, *, width: int, height: int, num_frames: int, fps: float,
                   duration_template: str | None, resolution_template: str | None,
                   force_duration: bool = False) -> str:
    """Append the duration (video, or ``force_duration``: the inverse negative metadata) and resolution sentences to a
    plain-text prompt, each after the text's trailing period, as the framework does."""
    text = text.strip()
    if duration_template is not None and (num_frames > 1 or force_duration):
        text = text.rstrip(".") + ". " + duration_template.format(duration=num_frames / fps, fps=fps)
    text = text.strip()
    if resolution_template is not None:
        text = text.rstrip(".") + ". " + resolution_template.format(height=height, width=width)
    return text


def caption_summary(caption: Caption, limit: int = 180) -> str:
    """A one-line human summary of a caption, for previews and galleries."""
    value = parse_caption(caption)
    if isinstance(value, dict):
        texts = (value[key].strip() for key in ("comprehensive_t2i_caption", "temporal_caption", "background_setting")
                 if isinstance(value.get(key), str) and value[key].strip())
        text = next(texts, None) or compact(value)
    else:
        text = value.strip()
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
