"""Reading framework input files (``-i``): one sample per object, named and checked as the framework does.

A ``.json`` file holds one sample object (or, as a convenience here, a list of them); a ``.jsonl`` file one per
line. A sample without a ``name`` gets the framework's: the file's stem, ``<stem>_<line>`` in JSONL (and for the
items of a list). Relative paths are relative to the input file's folder, URLs stay URLs, and a local file the
framework would not find is reported now, with the field that names it. What the user wrote is kept key for key
(:attr:`Sample.data`), because that is what the framework backend hands on unchanged.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import ValidationError
from ..protocol import framework as fw
from .checks import check_sample
from .fields import SampleFields, parse_fields
from .resolve import ResolvedSample, resolve

@dataclass(frozen=True)
class Sample:
    """One sample of an input file, validated: ``data`` as written, ``fields`` typed, paths relative to ``base_dir``."""

    data: Mapping[str, Any]
    fields: SampleFields = field(repr=False)
    base_dir: Path
    name: str
    source: Path | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, base_dir: str | os.PathLike[str] | None = None,
                  name: str | None = None, source: str | os.PathLike[str] | None = None,
                  check_files: bool = True) -> Sample:
        """A sample from a dict; ``name`` is the default when the dict has none (the framework's is the file stem)."""
        where = f"{Path(source).name}" if source else ""
        fields = parse_fields(data, where=where)
        base = Path(base_dir).expanduser().resolve() if base_dir is not None else Path.cwd()
        sample = cls(data=copy.deepcopy(dict(data)), fields=fields, base_dir=base,
                     name=fields.name or name or "sample", source=Path(source) if source else None)
        check_sample(sample, check_files=check_files)
        return sample

    # What the sample is -------------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        """``model_mode``, or the framework's inference from ``vision_path`` and ``num_frames``."""
        return self.fields.model_mode or fw.infer_mode(self.fields.vision_path, self.fields.num_frames)

    @property
    def hint_kinds(self) -> tuple[str, ...]:
        """The hints present, in the framework's packing order (edge, blur, depth, seg, wsm)."""
        return tuple(kind for kind in fw.HINT_KINDS if getattr(self.fields, kind) is not None)

    @property
    def is_transfer(self) -> bool:
        return bool(self.hint_kinds)

    def given(self, name: str) -> bool:
        """Whether the input sets ``name`` to a value (the framework counts only non-null values as given)."""
        return getattr(self.fields, name, None) is not None

    # Paths --------------------------------------------------------------------------------------------

    def path(self, value: str | None) -> str | None:
        """A path field's value made absolute against the input file's folder; URLs and ``None`` as they are."""
        if value is None or fw.is_url(value):
            return value
        path = Path(value).expanduser()
        return str(path if path.is_absolute() else (self.base_dir / path).resolve())

    def path_fields(self) -> dict[str, str]:
        """Every path the sample names, by field (``edge.control_path`` for a hint's), as written."""
        paths = {key: self.data[key] for key in (*fw.PATH_FIELDS, "output_dir") if self.data.get(key) is not None}
        for kind in self.hint_kinds:
            control = (self.data.get(kind) or {}).get("control_path")
            if control is not None:
                paths[f"{kind}.control_path"] = control
        return paths

    def payload(self) -> dict[str, Any]:
        """The sample as written with every local path absolute, for a framework run in another folder.

        A bare ``negative_prompt_file`` name that is not next to the input stays as it is: the framework then looks
        for it in its own ``defaults/`` folder.
        """
        data = copy.deepcopy(dict(self.data))
        for key, value in self.path_fields().items():
            absolute = self.path(value)
            if key == "negative_prompt_file" and not Path(absolute).is_file() and Path(value).parent == Path("."):
                continue
            if "." in key:
                kind = key.split(".")[0]
                data[kind] = {**data[kind], "control_path": absolute}
            else:
                data[key] = absolute
        return data

    def resolved(self, **kwargs: Any) -> ResolvedSample:
        """What the framework runs this sample with: see :func:`cosmos_helpers.specs.resolve.resolve`."""
        return resolve(self, **kwargs)

    def to_json(self) -> str:
        """The sample as written, 2-space indented with a trailing newline."""
        return json.dumps(dict(self.data), indent=2, ensure_ascii=False) + "\n"


def load_inputs(path: str | os.PathLike[str], *, check_files: bool = True) -> list[Sample]:
    """Every sample of an input file (``.json``: an object or a list; ``.jsonl``: one object per line)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ValidationError("input", f"file not found: {path}.", "check the input file's path.")
    suffix = path.suffix.lower()
    if suffix not in fw.INPUT_SUFFIXES:
        raise ValidationError("input", f"{path.name}: unsupported input file kind {suffix!r}.",
                              f"use one of {', '.join(fw.INPUT_SUFFIXES)} (the framework's -i formats).")
    text = path.read_text(encoding="utf-8")
    if suffix == ".jsonl":
        items = [_parse_json(line, path, number) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
        many = True
    else:
        data = _parse_json(text, path, None)
        many = isinstance(data, list)
        items = data if many else [data]
    if not items:
        raise ValidationError("input", f"{path.name} holds no sample.", "write at least one sample object.")
    samples, names = [], set()
    for index, item in enumerate(items):
        default = fw.default_name(path.with_suffix(".jsonl") if many else path, index)
        sample = Sample.from_dict(item, base_dir=path.parent, name=default, source=path, check_files=check_files)
        if sample.name in names:
            raise ValidationError("name", f"{path.name}: two samples are named {sample.name!r}.",
                                  "give each sample its own name (it is its output folder).")
        names.add(sample.name)
        samples.append(sample)
    return samples


def load_spec(path: str | os.PathLike[str], *, check_files: bool = True) -> Sample:
    """The one sample of an input file (an error if it holds several: use :func:`load_inputs`)."""
    samples = load_inputs(path, check_files=check_files)
    if len(samples) != 1:
        raise ValidationError("input", f"{Path(path).name} holds {len(samples)} samples, not one.",
                              "use load_inputs() (or `cosmos-helpers run`, which runs them all).")
    return samples[0]


def as_sample(source: Sample | Mapping[str, Any] | str | os.PathLike[str], **kwargs: Any) -> Sample:
    """A :class:`Sample` from a sample, a dict (paths relative to the current folder) or a one-sample file."""
    if isinstance(source, Sample):
        return source
    if isinstance(source, Mapping):
        return Sample.from_dict(source, **kwargs)
    return load_spec(source)


def _parse_json(text: str, path: Path, line: int | None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"{path.name} line {line}" if line else f"{path.name} line {exc.lineno}"
        raise ValidationError("input", f"{where} is not valid JSON ({exc.msg}).", "fix the JSON.") from None


__all__ = ["Sample", "as_sample", "load_inputs", "load_spec"]
