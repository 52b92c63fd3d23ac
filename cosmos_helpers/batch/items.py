"""The items of a batch file: one generation request or one framework input sample per line.

``REQUESTS.jsonl`` holds one JSON object per line (blank lines skipped). A line with ``mode`` is a
:class:`~cosmos_helpers.request.GenerationRequest` (its keyword arguments; ``prompt`` a string or a caption object,
``image`` / ``video`` paths relative to the file) and an optional ``name``; any other line is a Cosmos Framework input
sample (``OmniSampleOverrides``, as in the framework's ``-i`` files; ``model_mode`` picks the mode). Every line is
checked when the file is read, so a bad line 11 fails before item 1 runs.

Each item's output goes where a framework run puts it, ``<out>/<name>/vision.*`` with its manifest, so a rerun
finds finished items by their fingerprint (:func:`cosmos_helpers.result.check_free`) and refuses another request's
output at that name. Names default to ``<file stem>_<line index>`` (the framework's rule for JSONL) and must be
unique.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .. import media
from ..errors import ValidationError
from ..protocol import framework as fw
from ..request import GenerationRequest
from ..specs import Sample

STEM = "vision"  # the framework's output name, which run_spec uses too
_MEDIA = ("image", "video", "actions")


@dataclass(frozen=True)
class BatchItem:
    """One line of a batch: ``kind`` is ``request`` or ``sample``; ``data`` the object as written."""

    index: int
    name: str
    kind: str
    data: Mapping[str, Any] = field(repr=False)
    base_dir: Path = field(default_factory=Path.cwd, repr=False)

    def request(self) -> Any:
        """The :class:`GenerationRequest` of a request line (validated again: cheap, and the object is not shared)."""
        values = {k: v for k, v in self.data.items() if k != "name"}
        for key in _MEDIA:
            if isinstance(values.get(key), str):
                values[key] = self.base_dir / values[key]
        for key in ("guidance_interval", "condition_frames"):
            if isinstance(values.get(key), list):
                values[key] = tuple(values[key])
        try:
            return GenerationRequest(**values)
        except TypeError as exc:  # an unknown keyword
            raise ValidationError(f"line {self.index + 1}", f"{exc}.", "use GenerationRequest's field names "
                                  "(mode, prompt, tier, num_frames, seed, ...), or write a framework sample "
                                  "(model_mode, prompt, resolution, ...).") from None

    def sample(self) -> Any:
        """The :class:`~cosmos_helpers.specs.Sample` of a sample line (paths relative to the batch file)."""
        return Sample.from_dict(self.data, base_dir=self.base_dir, name=self.name)

    def stem(self, out: str | os.PathLike[str]) -> Path:
        return Path(out) / self.name / STEM

    def to_dict(self) -> dict[str, Any]:
        """What a Ray worker needs to rebuild the item (plain data: it crosses processes)."""
        return {**vars(self), "data": dict(self.data), "base_dir": str(self.base_dir)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BatchItem":
        return cls(**{**data, "base_dir": Path(data["base_dir"])})


def load_items(source: str | os.PathLike[str] | Sequence[Mapping[str, Any]], *,
               base_dir: str | os.PathLike[str] | None = None) -> list[BatchItem]:
    """The items of a JSONL file (or of a list of objects), each parsed and validated now."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source).expanduser()
        if not path.is_file():
            raise ValidationError("requests", f"file not found: {path}.", "give a .jsonl file, one request or "
                                  "framework sample per line.")
        lines = [(n, line) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()) if line.strip()]
        objects = [(n, _parse(line, path.name, n)) for n, line in lines]
        base, stem = path.resolve().parent, path.stem
    else:
        objects = list(enumerate(source))
        base, stem = Path(base_dir or Path.cwd()).resolve(), "item"
    if not objects:
        raise ValidationError("requests", "the batch holds no item.", "write one JSON object per line.")
    items, names = [], set()
    for position, (line, data) in enumerate(objects):
        if not isinstance(data, Mapping):
            raise ValidationError(f"line {line + 1}", f"expected a JSON object, got {type(data).__name__}.",
                                  "write one {...} per line.")
        name = str(data.get("name") or fw.default_name(Path(f"{stem}.jsonl"), position))
        if name in names:
            raise ValidationError("name", f"two items are named {name!r}.", "give each item its own name (it is "
                                  "its output folder).")
        names.add(name)
        item = BatchItem(index=position, name=name, kind="request" if "mode" in data else "sample", data=dict(data),
                         base_dir=base)
        item.request() if item.kind == "request" else item.sample()  # every line's checks, before any work
        items.append(item)
    return items


def write_items(path: str | os.PathLike[str], objects: Sequence[Mapping[str, Any]]) -> Path:
    """Write a batch file: one JSON object per line (requests with ``mode``, or framework samples), atomically;
    every object is checked as :func:`load_items` will read it, before the file is written."""
    path = Path(path)
    load_items(objects, base_dir=path.parent)
    text = "".join(json.dumps(dict(obj), ensure_ascii=False) + "\n" for obj in objects)
    return media.write_bytes_atomic(path, text.encode("utf-8"), overwrite=True)


def _parse(line: str, where: str, number: int) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{where} line {number + 1}", f"not JSON ({exc.msg} at column {exc.colno}).",
                              "write one JSON object per line.") from None
