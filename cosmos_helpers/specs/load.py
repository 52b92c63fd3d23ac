"""Reading framework input files (``-i``: a ``.json`` object or list, or ``.jsonl`` lines) as the framework names
and locates them, what the user wrote kept key for key (:attr:`Sample.data`: the framework backend hands it on)."""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Mapping

from ..errors import ValidationError
from ..protocol import framework as fw
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
                  check_files: bool = True, computed: Collection[str] = ()) -> Sample:
        """A sample from a dict; ``name`` is the default when the dict has none. ``computed`` names hints whose
        control is computed from ``vision_path`` before the run (``run_spec(compute_controls=...)``): each is added
        if absent and may leave ``control_path`` out."""
        data = with_computed_hints(data, computed)
        fields = parse_fields(data, where=Path(source).name if source else "")
        base = Path(base_dir).expanduser().resolve() if base_dir is not None else Path.cwd()
        sample = cls(data=copy.deepcopy(dict(data)), fields=fields, base_dir=base,
                     name=fields.name or name or "sample", source=Path(source) if source else None)
        check_sample(sample, check_files=check_files, computed=computed)
        return sample

    @property
    def mode(self) -> str:
        return self.fields.model_mode or fw.infer_mode(self.fields.vision_path, self.fields.num_frames)

    @property
    def hint_kinds(self) -> tuple[str, ...]:  # in the framework's packing order
        return tuple(kind for kind in fw.HINT_KINDS if getattr(self.fields, kind) is not None)

    @property
    def is_transfer(self) -> bool:
        return bool(self.hint_kinds)

    def given(self, name: str) -> bool:
        """Whether the input sets ``name`` to a value (the framework counts only non-null values as given)."""
        return getattr(self.fields, name, None) is not None

    def path(self, value: str | None) -> str | None:
        """A path field's value made absolute against the input file's folder; URLs and ``None`` as they are."""
        if value is None or fw.is_url(value):
            return value
        path = Path(value).expanduser()
        return str(path if path.is_absolute() else (self.base_dir / path).resolve())

    def path_fields(self) -> dict[str, str]:
        """Every path the sample names, by field (``edge.control_path`` for a hint's), as written."""
        paths = {key: self.data.get(key) for key in (*fw.PATH_FIELDS, "output_dir")}
        for kind in self.hint_kinds:
            paths[f"{kind}.control_path"] = (self.data.get(kind) or {}).get("control_path")
        return {key: value for key, value in paths.items() if value is not None}

    def payload(self) -> dict[str, Any]:
        """The sample as written with every local path absolute, for a framework run in another folder. A bare
        ``negative_prompt_file`` name that is not next to the input stays as it is: the framework then looks for it in
        its own ``defaults/`` folder."""
        data = copy.deepcopy(dict(self.data))
        for key, value in self.path_fields().items():
            absolute = self.path(value)
            if key == "negative_prompt_file" and not Path(absolute).is_file() and Path(value).parent == Path("."):
                continue
            kind, hint, _ = key.partition(".")
            if hint:
                data[kind] = {**data[kind], "control_path": absolute}
            else:
                data[key] = absolute
        return data

    def resolved(self, **kwargs: Any) -> ResolvedSample:
        return resolve(self, **kwargs)

    def to_json(self) -> str:
        return json.dumps(dict(self.data), indent=2, ensure_ascii=False) + "\n"


def load_inputs(path: str | os.PathLike[str], *, check_files: bool = True, computed: Collection[str] = ()
                ) -> list[Sample]:
    """Every sample of an input file (``.json``: an object or a list; ``.jsonl``: one object per line)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ValidationError("input", f"file not found: {path}.", "check the input file's path.")
    suffix = path.suffix.lower()
    if suffix not in fw.INPUT_SUFFIXES:
        raise ValidationError("input", f"{path.name}: unsupported input file kind {suffix!r}.",
                              f"use one of {', '.join(fw.INPUT_SUFFIXES)} (the framework's -i formats).")
    text = path.read_text(encoding="utf-8")
    data = ([_parse_json(line, path, number) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
            if suffix == ".jsonl" else _parse_json(text, path, None))
    many = isinstance(data, list)  # a list is named as JSONL lines are
    items = data if many else [data]
    if not items:
        raise ValidationError("input", f"{path.name} holds no sample.", "write at least one sample object.")
    samples: dict[str, Sample] = {}
    for index, item in enumerate(items):
        default = fw.default_name(path.with_suffix(".jsonl") if many else path, index)
        sample = Sample.from_dict(item, base_dir=path.parent, name=default, source=path, check_files=check_files,
                                  computed=computed)
        if sample.name in samples:
            raise ValidationError("name", f"{path.name}: two samples are named {sample.name!r}.",
                                  "give each sample its own name (it is its output folder).")
        samples[sample.name] = sample
    return list(samples.values())


def load_spec(path: str | os.PathLike[str], *, check_files: bool = True, computed: Collection[str] = ()) -> Sample:
    """The one sample of an input file (an error if it holds several: use :func:`load_inputs`)."""
    samples = load_inputs(path, check_files=check_files, computed=computed)
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
    return load_spec(source, computed=kwargs.get("computed", ()))


def _parse_json(text: str, path: Path, line: int | None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError("input", f"{path.name} line {line or exc.lineno} is not valid JSON ({exc.msg}).",
                              "fix the JSON.") from None


def check_sample(sample: Sample, *, check_files: bool = True, computed: Collection[str] = ()) -> None:
    """Raise :class:`ValidationError` for the first rule ``sample`` breaks: what the framework rejects beyond field
    types (``inference/args.py``), what would fail only minutes into a run (a depth hint with nothing to read,
    overlapping chunks), what the framework would run otherwise than written (both ``prompt`` and ``prompt_path``)."""
    f, mode = sample.fields, sample.mode
    if f.prompt is not None and f.prompt_path is not None:
        raise ValidationError("prompt_path", "both prompt and prompt_path are given (the framework would silently "
                              "use prompt).", "keep only one of them.")
    suffix = Path(f.vision_path.split("?")[0]).suffix.lower() if f.vision_path is not None else None
    if suffix is not None and suffix not in fw.IMAGE_EXTENSIONS + fw.VIDEO_EXTENSIONS:
        raise ValidationError("vision_path", f"{suffix or 'no extension'} is not an input the framework reads "
                              "(\"Invalid vision extension\").",
                              f"use an image ({', '.join(fw.IMAGE_EXTENSIONS)}) or an .mp4 video.")
    if mode in fw.SOUND_CONDITION_MODES and f.sound_path is None:
        raise ValidationError("sound_path", f"model_mode {mode} needs a conditioning audio clip.", "set sound_path.")
    if mode == "forward_dynamics" and f.action_path is None:
        raise ValidationError("action_path", "model_mode forward_dynamics needs the actions to play.",
                              "set action_path to the action JSON file.")
    if mode in ("image2video", "image2image") and f.vision_path is None:
        raise ValidationError("vision_path", f"model_mode {mode} needs a conditioning image.", "set vision_path.")
    if mode == "video2video" and f.vision_path is None and not sample.is_transfer:
        raise ValidationError("vision_path", "model_mode video2video needs a conditioning video.", "set vision_path.")
    if sample.is_transfer:
        _check_transfer(sample, computed)
    elif given := [key for key in fw.TRANSFER_ONLY_FIELDS if sample.given(key)]:
        raise ValidationError(given[0], "is a transfer field, but the sample has no control hint (the framework "
                              "rejects it).", f"add a hint ({', '.join(fw.HINT_KINDS)}) or remove {given[0]}.")
    elif f.control_guidance not in (None, 1.0):
        raise ValidationError("control_guidance", f"{f.control_guidance:g} needs a control hint (the framework "
                              "rejects it).", f"add a hint ({', '.join(fw.HINT_KINDS)}) or remove control_guidance.")
    for key in ("guidance_interval", "control_guidance_interval"):
        interval = getattr(f, key)
        if interval is not None and interval[0] > interval[1]:
            raise ValidationError(key, f"lo > hi in {list(interval)}: the interval is empty (active iff lo < t < hi).",
                                  f"write [{interval[1]:g}, {interval[0]:g}].")
    if check_files:
        _check_files(sample)


def with_computed_hints(data: Mapping[str, Any], computed: Collection[str]) -> Mapping[str, Any]:
    """``data`` with an empty hint for each computed kind it lacks; a computed hint naming a file is refused (two
    sources for one control)."""
    if not computed:  # also leaves a sample that is no JSON object to parse_fields' error
        return data
    out = dict(data)
    for kind in computed:
        hint = out.get(kind)
        if hint is not None and not isinstance(hint, Mapping):
            raise ValidationError(kind, f"expected a hint object, got {hint!r}.", f'write "{kind}": {{}}.')
        if hint and hint.get("control_path") is not None:
            raise ValidationError(f"{kind}.control_path", f"the sample supplies a {kind} control and it is also to "
                                  "be computed.", f"remove {kind}.control_path, or do not compute {kind}.")
        out[kind] = dict(hint or {})
    return out


def _check_transfer(sample: Sample, computed: Collection[str] = ()) -> None:
    f, mode = sample.fields, sample.mode
    if mode not in fw.TRANSFER_MODES:
        inferred = "" if f.model_mode else " (inferred from num_frames 1)"
        raise ValidationError("model_mode", f"transfer cannot run as {mode}{inferred}: it produces video.",
                              'set "model_mode": "video2video"; the output length comes from the control, so image '
                              "transfer needs a one-frame control, not num_frames 1.")
    if f.sound_path is not None or f.enable_sound:
        field = "sound_path" if f.sound_path is not None else "enable_sound"
        raise ValidationError(field, "transfer cannot be combined with sound (control guidance rejects it).",
                              f"remove {field}, or run the sound generation as its own sample.")
    weights = []
    for kind in sample.hint_kinds:
        hint = getattr(f, kind)
        if kind not in fw.COMPUTABLE_HINTS and kind not in computed and hint.control_path is None:
            raise ValidationError(f"{kind}.control_path", f"{kind} maps cannot be computed from RGB; a precomputed "
                                  "control video is required.", f"set {kind}.control_path to the {kind} video.")
        if hint.control_path is None and f.vision_path is None:
            raise ValidationError(f"{kind}.control_path", f"the {kind} hint has neither a control_path nor a "
                                  "vision_path to compute it from.", f"set {kind}.control_path or vision_path.")
        weight = 1.0 if hint.weight is None else float(hint.weight)
        if weight < 0:  # never NaN or infinite: the fields refuse those
            raise ValidationError(f"{kind}.weight", f"must be a finite number >= 0, got {hint.weight}.",
                                  "use e.g. 1.0.")
        weights.append(weight)
    if sum(weights) <= 0:
        raise ValidationError("weight", f"all hint weights are zero ({dict(zip(sample.hint_kinds, weights))}); "
                              "they are normalised by their sum.", "give at least one hint a positive weight.")
    kinds = sample.hint_kinds
    defaults = {**fw.TRANSFER_SAMPLE_DEFAULTS, **(fw.HINT_TUNED_DEFAULTS[kinds[0]] if len(kinds) == 1 else {})}
    chunk = fw.round_up_frames(f.num_video_frames_per_chunk or defaults["num_video_frames_per_chunk"])
    n_cond = defaults["num_conditional_frames"] if f.num_conditional_frames is None else f.num_conditional_frames
    if n_cond >= chunk:
        raise ValidationError("num_conditional_frames", f"{n_cond} overlap frames leave no new frames in a "
                              f"{chunk}-frame chunk.", f"use fewer than {chunk} (usually 1), or a longer "
                              "num_video_frames_per_chunk.")
    if (f.num_first_chunk_conditional_frames or 0) > 0 and f.vision_path is None:
        raise ValidationError("num_first_chunk_conditional_frames", "first-chunk conditioning frames come from "
                              "vision_path, which is not set.", "set vision_path or use 0.")


def _check_files(sample: Sample) -> None:
    """Every local file the framework requires to exist when it validates an input (its FilePath fields); a bare
    ``negative_prompt_file`` name may instead be a file of the framework's own ``defaults/``."""
    for key, value in sample.path_fields().items():
        path = Path(sample.path(value))
        if key == "output_dir" or fw.is_url(value) or path.is_file():
            continue
        fix = "fix the path (relative paths are relative to the input file's folder)"
        if key == "negative_prompt_file":
            if Path(value).parent == Path("."):
                continue
            fix = "fix the path, or give the bare name of a file in the framework's defaults/"
        elif key in ("edge.control_path", "blur.control_path"):
            fix += ", or remove control_path to compute the map from vision_path"
        raise ValidationError(key, f"file not found: {path}.", fix + ".")
