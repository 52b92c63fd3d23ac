"""The items of a batch file: one JSON object per line, a :class:`~cosmos_helpers.request.GenerationRequest` (with
``mode``) or a Cosmos Framework input sample, checked when read. :func:`plan` skips finished items and refuses another
request's output at ``<out>/<name>/vision.*`` before any work (never a URL sample's: its record needs the downloads).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .. import media
from ..errors import ValidationError
from ..protocol import framework as fw
from ..request import GenerationRequest
from ..result import Generation, check_free, find_saved
from ..specs import Sample
from ..transfer.runner import plan_spec, run_spec
from ..workflow import generate_and_save

STEM = "vision"  # the framework's output name, which run_spec uses too
_MEDIA = ("image", "video", "actions")  # paths relative to the batch file
_TUPLES = ("guidance_interval", "condition_frames")


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
        values.update({k: self.base_dir / v for k, v in values.items() if k in _MEDIA and isinstance(v, str)})
        values.update({k: tuple(v) for k, v in values.items() if k in _TUPLES and isinstance(v, list)})  # JSON lists
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
    """The items of a JSONL file (or of a list of objects), each parsed and validated now; an item's optional ``name``
    (default ``<file stem>_<line index>``, the framework's rule) is its output folder."""
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


def plan(items: Sequence[BatchItem], backend: Any, out: str | os.PathLike[str], *, profile: str,
         settings: dict[str, Any]) -> tuple[list[BatchItem], dict[str, Path]]:
    """``(to do, {name: finished media})``; raises for the first item whose folder holds another request's output."""
    todo, done = [], {}
    for item in items:
        if item.kind == "request":  # the item's record on ``backend``, checked there (nothing sent or loaded)
            recorded = item.request()
            backend.check(recorded)
        else:
            recorded = plan_spec(item.sample(), backend=backend, profile=profile, out=out, progress=False).run
        urls = item.kind == "sample" and any(fw.is_url(value) for value in item.sample().path_fields().values())
        found = (find_saved if urls else check_free)(item.stem(out), recorded, backend=backend.name, settings=settings)
        if found is None:
            todo.append(item)
        else:
            done[item.name] = found
    return todo, done


def run_item(item: BatchItem, backend: Any, out: str | os.PathLike[str], *, profile: str) -> Generation:
    """Make (or find) one item's output at ``<out>/<name>/vision.*`` on a backend object."""
    if item.kind == "request":
        return generate_and_save(backend, item.request(), item.stem(out))
    return run_spec(item.sample(), backend=backend, profile=profile, out=out, progress=False)


def timed_run(item: BatchItem, backend: Any, out: str | os.PathLike[str], *, profile: str) -> dict[str, Any]:
    """:func:`run_item`, and what became of it: the media, whether it was skipped, the server replica that made it
    (when the stand-in says; else ``None``), and when it started and finished by the worker's own clock."""
    started = time.time()
    generation = run_item(item, backend, out, profile=profile)
    replica = (generation.provenance.get("standin") or {}).get("replica") or {}
    return {"media": str(generation.paths["media"]), "skipped": bool(generation.provenance.get("skipped")),
            "worker": f"replica {replica.get('host')}:{replica.get('pid')}" if replica.get("pid") else None,
            "started": started, "finished": time.time()}
