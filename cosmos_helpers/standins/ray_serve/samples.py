"""What one replica of the stand-in does with one sample: :func:`cosmos_helpers.transfer.runner.run_spec` on the
embedded tiny weights, answered as the framework's ``SampleOutputs``. What differs from the framework, said in every
answer's ``content.standin``: the tiny model runs whatever a client hoped for (the deployment is named after it, so
``Cosmos3-Nano`` gets the framework's 404), and values a sample leaves out take the tiny profile's CPU sizes."""

from __future__ import annotations

import json
import os
import socket
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ... import media
from ...errors import ValidationError
from ...specs import Sample
from ...specs.fields import SampleFields
from ...transfer.runner import run_spec

BANNER = ("a cosmos_helpers stand-in of the Cosmos Framework's Ray Serve app (5eee9ed), NOT NVIDIA's framework: it "
          "runs the embedded tiny weights with diffusers, whatever model a client hoped for")
FILLED = ("values the sample leaves out take the {profile} profile's CPU sizes, not the framework's 720p / 189 "
          "frames / 35 steps")


@dataclass(frozen=True)
class SampleSetup:
    """The stand-in's share of the framework's setup."""

    profile: str = "tiny"
    keep_going: bool = False
    skip_invalid_samples: bool = False


def run_sample(item: Mapping[str, Any], *, output_dir: str | Path, folder: str, backend: Any,
               setup: SampleSetup = SampleSetup()) -> dict[str, Any]:
    """Run ``item`` (the router's sample: name, seed and model filled in) into ``<output_dir>/<folder>/``."""
    started = time.perf_counter()
    args = {k: v for k, v in item.items() if v is not None}
    # as the framework's workers do first (inference.py generate_batch): the sample's arguments in its folder
    media.write_bytes_atomic(Path(output_dir) / folder / "sample_args.json", json.dumps(args).encode(),
                             overwrite=True)
    try:
        if not args.get("name"):
            raise ValidationError("name", "the framework's sample arguments require a name (SampleArgs.name).",
                                  "give the sample a name.")
        data = {k: v for k, v in args.items() if k != "output_dir"}
        sample = Sample.from_dict({**data, "name": folder}, base_dir=output_dir, name=folder)
        generation = run_spec(sample, backend=backend, profile=setup.profile, out=output_dir, progress=False)
    except Exception as exc:
        return _failed(args, exc, setup)
    output = Path(generation.paths["media"])
    files = [f"{folder}/{output.name}"] + [f"{folder}/{name}" for name in
                                          (generation.provenance.get("control_files") or {}).values()]
    # what the stand-in says about itself in each answer: what it is, which model really ran, and where
    content: dict[str, Any] = {"standin": {
        "what": BANNER, "model_ran": generation.model, "profile": setup.profile,
        "defaults": FILLED.format(profile=setup.profile),
        "replica": {"host": socket.gethostname(), "pid": os.getpid(), "replica": _replica_id()},
        "seconds": round(time.perf_counter() - started, 4)}}
    if generation.actions is not None:
        content["action"] = generation.actions.tolist()
    return {"args": args, "status": "success", "message": None, "stack_trace": None,
            "outputs": [{"content": content, "files": files}]}


def validated(body: Any) -> dict[str, Any]:
    """The body checked as ``OmniSampleOverrides`` (the project's copy, ``specs.fields.SampleFields``), as JSON with
    every field it gave; a bad one is FastAPI's 422 (``loc`` starting with ``body``), as the framework's router."""
    import pydantic
    from fastapi.exceptions import RequestValidationError

    try:
        sample = SampleFields.model_validate_json(json.dumps(body))
    except pydantic.ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None
    return sample.model_dump(mode="json", exclude_unset=True)


def _failed(args: dict[str, Any], exc: Exception, setup: SampleSetup) -> dict[str, Any]:
    """A failure as the framework's setup switches say: a refused sample is ``skip`` with ``skip_invalid_samples``,
    any failure ``error`` with ``keep_going``; else it is raised (the router's HTTP 500, as the framework's)."""
    refused = isinstance(exc, ValidationError)
    if refused and setup.skip_invalid_samples:
        return {"args": {"name": "", **args}, "status": "skip", "message": str(exc), "stack_trace": None,
                "outputs": []}
    if not setup.keep_going:
        raise exc
    message = f"Error generating sample '{args.get('name')}': {exc}"
    return {"args": {"name": "", **args}, "status": "error", "message": message,
            "stack_trace": "".join(traceback.format_exception(exc)), "outputs": []}


def _replica_id() -> str | None:
    try:
        from ray import serve

        return str(serve.get_replica_context().replica_id.unique_id)
    except Exception:  # not inside a Serve replica (a direct call in a test)
        return None
