"""Transfer with depth / seg controls computed from the sample's own RGB clip (``compute_controls``).

``{"depth": MODEL, "seg": MODEL}`` makes each named hint's ``control_path`` the control video this package
computes from ``vision_path`` (:mod:`cosmos_helpers.controls`), written into the run's output folder before the
run. Every backend then gets an ordinary supplied control, exactly as if the user had made the file: the
framework reads it from the input file, vLLM-Omni receives it as ``control_reference`` (or a server path), the
diffusers transfer reads it like any control. A hint the sample already has keeps its weight; one it lacks is
added. A hint that already names a control file is refused (two sources for one control).
"""

from __future__ import annotations

import copy
import os
from typing import Any, Mapping

from ..controls.estimation import check_models, resolve_model
from ..controls.videos import control_video_path
from ..errors import ValidationError
from ..specs.load import Sample, with_computed_hints

FIELD = "compute_controls"


def with_computed_controls(sample: Sample, models: Mapping[str, str], folder: str | os.PathLike[str]
                           ) -> Sample:
    """``sample`` with each hint of ``models`` pointing at its computed control video in ``folder`` (not yet made).
    Checks everything that can be checked without work: the kinds, the models (their configs), a local ``vision_path``,
    no control file already named for those hints."""
    check_models(models)
    data: dict[str, Any] = copy.deepcopy(dict(with_computed_hints(sample.data, models)))
    if not data.get("vision_path"):
        raise ValidationError("vision_path", f"{FIELD} computes controls from the RGB clip, and the sample has none.",
                              "set vision_path to the clip (or supply the control files as control_path).")
    for kind, name in models.items():
        resolve_model(kind, name, field_name=f"{FIELD}.{kind}")
        data[kind] = {**data[kind], "control_path": str(control_video_path(folder, kind))}
    return Sample.from_dict(data, base_dir=sample.base_dir, name=sample.name, source=sample.source,
                            check_files=False)


def parse_compute_controls(text: str | None, flag: str = "--compute-controls") -> dict[str, str] | None:
    """``"depth=MODEL,seg=MODEL"`` (the command line's form, given as ``flag``) as ``{"depth": MODEL, ...}``."""
    if not text:
        return None
    models: dict[str, str] = {}
    for item in text.split(","):
        kind, sep, name = item.strip().partition("=")
        if not sep or not kind or not name:
            raise ValidationError(flag, f"{item.strip()!r} names no model.",
                                  "write KIND=MODEL, e.g. depth=depth-anything/Depth-Anything-V2-Small-hf,seg=tiny.")
        models[kind.strip()] = name.strip()
    return check_models(models)

