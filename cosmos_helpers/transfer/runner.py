"""``run_spec``: one framework input sample, any mode, any backend, saved where the framework would put it.

It resolves the sample, refuses what the backend cannot honour, makes sure the output folder is free for it, and
only then works: ``<out>/<name>/vision.mp4`` (``vision.jpg`` for one frame) with its manifest ``vision.json`` and,
for a transfer on diffusers or the framework, ``control_<hint>.mp4``. The manifest's fingerprint covers the input
as written, the overrides, profile, model and the content of every input file, so a rerun skips a finished output
and never mistakes another input's output for it (:func:`~cosmos_helpers.result.check_free`).
"""

from __future__ import annotations

import copy
import json
import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Mapping

from .. import media
from ..backends import backend_by_name
from ..backends.base import Backend
from ..backends.vllm_wire import BACKEND_NAME as VLLM
from ..controls.estimation import check_models, resolve_model
from ..controls.videos import control_video_path, write_control_videos
from ..errors import OutputExistsError, ValidationError
from ..presets import DEFAULT_PROFILE, model_for
from ..protocol import framework as fw
from ..result import MANIFEST_SUFFIX, Generation, check_free, read_manifest
from ..specs.load import Sample, as_sample, with_computed_hints
from ..specs.resolve import ResolvedSample
from ..specs.runs import PlannedRun, SampleRun, given_fields
from ..step_cache import StepCache, check_step_cache

STEM = "vision"
_FIELD = "compute_controls"
_CONTROL_SUFFIXES = (".mp4", ".jpg")  # the framework saves a control like the output (args.py vision_extension)


def run_spec(spec: Sample | Mapping[str, Any] | str | os.PathLike[str], *, backend: Any = "diffusers",
             profile: str | None = DEFAULT_PROFILE, model: str | None = None, out: str | os.PathLike[str] = "outputs",
             overrides: Mapping[str, Any] | None = None, guardrails: bool | None = None, overwrite: bool = False,
             progress: bool = True, checkout: str | os.PathLike[str] | None = None, url: str | None = None,
             server_paths: bool = False, compute_controls: Mapping[str, str] | None = None,
             control_device: str | None = None, step_cache: StepCache = None) -> Generation:
    """Run one sample (a :class:`~cosmos_helpers.specs.Sample`, a dict or a one-sample input file) on ``backend``
    (a name or a backend object; ``checkout`` / ``url`` locate the framework / the vLLM-Omni server for a name) and
    save it as ``<out>/<name>/vision.*`` (or load a finished identical run); :func:`plan_spec` only checks it.

    ``profile`` picks the model (unless ``model``) and the guardrails (unless ``guardrails``) and fills the tier,
    frames and steps the sample leaves unset (``tiny`` on a CPU); on the framework it only picks. ``overrides``
    (``resolution``, ``num_steps``, ``seed``) win over the sample, as the framework's CLI flags do. ``server_paths``:
    the vLLM-Omni server shares this filesystem, so controls beyond the uploaded one may be sent as paths.
    ``compute_controls`` (``{"depth": MODEL, "seg": MODEL}``, ``"tiny"``: the offline stand-ins) computes those
    controls from ``vision_path`` on ``control_device`` (default CUDA when there is one) into
    ``<out>/<name>/estimated_<kind>.mp4`` and runs with them as supplied controls (:func:`with_computed_controls`).
    ``step_cache``: ``None`` (the backend's default: on in the framework's command line, off elsewhere), ``"off"`` or
    a :class:`~cosmos_helpers.SeaCache`; vLLM-Omni takes it when its server starts, so there it is refused.
    """
    runner, run, folder = _checked_run(spec, backend, checkout, url, profile=profile, model=model, out=out,
                                       overrides=overrides, guardrails=guardrails, compute_controls=compute_controls,
                                       step_cache=step_cache, progress=progress, dry=False, server_paths=server_paths,
                                       overwrite=overwrite, control_device=control_device)
    stem = folder / STEM
    if not overwrite:
        done = check_free(stem, run, backend=runner.name, settings=runner.output_settings())
        if done is not None:
            generation = Generation.load(done)
            generation.request, generation.provenance["skipped"] = run, True
            return generation
        _check_controls_free(folder, run.resolved)
    generation = runner.run_sample(run, progress=progress, server_paths=server_paths)
    generation.request, generation.settings = run, runner.output_settings()
    _save_controls(generation, folder, overwrite)
    generation.save(stem, overwrite=overwrite)
    return generation


def plan_spec(spec: Sample | Mapping[str, Any] | str | os.PathLike[str], *, backend: Any = "diffusers",
              profile: str | None = DEFAULT_PROFILE, model: str | None = None, out: str | os.PathLike[str] = "outputs",
              overrides: Mapping[str, Any] | None = None, guardrails: bool | None = None, progress: bool = True,
              checkout: str | os.PathLike[str] | None = None, url: str | None = None,
              compute_controls: Mapping[str, str] | None = None, step_cache: StepCache = None) -> PlannedRun:
    """:func:`run_spec`'s checks, and no work: what would run, as a :class:`~cosmos_helpers.specs.PlannedRun`
    (its ``run`` is what the output's manifest would record). On the framework it writes the run folder (input
    file and command, for a job submitted elsewhere); URL inputs are not downloaded, controls not computed."""
    runner, run, _ = _checked_run(spec, backend, checkout, url, profile=profile, model=model, out=out,
                                  overrides=overrides, guardrails=guardrails, compute_controls=compute_controls,
                                  step_cache=step_cache, progress=progress, dry=True)
    return runner.dry_run(run, pending=tuple(compute_controls or ()))


def _checked_run(spec: Any, backend: Any, checkout: Any, url: str | None, *, profile: str | None, model: str | None,
                 out: Any, overrides: Mapping[str, Any] | None, guardrails: bool | None,
                 compute_controls: Mapping[str, str] | None, step_cache: StepCache, progress: bool, dry: bool,
                 server_paths: bool = False, overwrite: bool = False, control_device: str | None = None
                 ) -> tuple[Backend, SampleRun, Path]:
    """The backend (built from a name), and the sample read, resolved and checked by it before any work; unless
    ``dry``, its inputs made local (and checked where a check reads them) and its computed controls made."""
    runner = backend_by_name(backend, checkout=checkout, url=url, progress=progress) if isinstance(
        backend, str) else backend
    if compute_controls:
        check_models(compute_controls)  # the kinds first: a sample gets an empty hint of each
    sample = as_sample(spec, computed=tuple(compute_controls or ()))
    step_cache = check_step_cache(step_cache)
    folder = Path(out) / sample.name
    if compute_controls:
        sample = with_computed_controls(sample, compute_controls, folder)
    resolved = runner.resolve_sample(sample, folder=folder, profile=profile, model=model, overrides=overrides,
                                     guardrails=guardrails)
    given = given_fields(sample, overrides, resolved)
    runner.check_sample(sample, resolved, given, step_cache)
    if not dry:
        resolved = runner.localize(resolved, given, progress=progress, server_paths=server_paths)
    if compute_controls and not dry:
        if not overwrite:
            _check_same_input(folder / STEM, sample)
        write_control_videos(resolved.vision_path, compute_controls, folder, max_frames=resolved.max_frames,
                             device=control_device, overwrite=overwrite, progress=progress)
    return runner, SampleRun.create(sample, resolved, overrides, step_cache), folder


def with_computed_controls(sample: Sample, models: Mapping[str, str], folder: str | os.PathLike[str]) -> Sample:
    """``sample`` with each hint of ``models`` pointing at the control video computed (later) from ``vision_path``
    into ``folder``, so every backend gets an ordinary supplied control; a hint the sample has keeps its weight. Checks
    what needs no work: the kinds, the models (their configs), a ``vision_path``."""
    check_models(models)
    data: dict[str, Any] = copy.deepcopy(dict(with_computed_hints(sample.data, models)))
    if not data.get("vision_path"):
        raise ValidationError("vision_path", f"{_FIELD} computes controls from the RGB clip, and the sample has none.",
                              "set vision_path to the clip (or supply the control files as control_path).")
    for kind, name in models.items():
        resolve_model(kind, name, field_name=f"{_FIELD}.{kind}")
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


def _control_file(folder: Path, kind: str, suffix: str = ".mp4") -> Path:
    return folder / fw.CONTROL_FILE.format(hint=kind, suffix=suffix)


def _check_same_input(stem: Path, sample: Any) -> None:
    """Before computing controls into the run's folder: an output there made from another input is refused now,
    not after the control models ran (the full check needs the controls' content, so it comes after them)."""
    saved = read_manifest(stem.with_suffix(MANIFEST_SUFFIX))
    recorded = ((saved or {}).get("request") or {}).get("input")
    if recorded is not None and recorded != json.loads(json.dumps(dict(sample.data))):
        raise OutputExistsError(f"{stem.parent} holds the output of another input (its manifest records another "
                                "sample); pass overwrite=True (--overwrite), choose another name, or another output "
                                "folder.")


def _check_controls_free(folder: Path, r: ResolvedSample) -> None:
    """Before any work: a ``control_<hint>`` file this run would write must not be another run's (its manifest, the
    one thing that could say whose it is, is absent: ``check_free`` found no finished output here)."""
    for path in (_control_file(folder, kind, suffix) for kind in r.hint_kinds for suffix in _CONTROL_SUFFIXES):
        if path.exists():
            raise OutputExistsError(f"{path} already exists from a different run; pass overwrite=True "
                                    "(--overwrite), choose another name, or another output folder.")


def _save_controls(generation: Generation, folder: Path, overwrite: bool) -> None:
    """Write the controls a transfer followed beside its output, and name them in its manifest (``provenance``)."""
    written: dict[str, str] = {}
    for kind, frames in (getattr(generation, "controls", None) or {}).items():  # the diffusers transfer's maps
        path = media.write_mp4(_control_file(folder, kind), frames, generation.fps, overwrite=overwrite)
        written[kind] = Path(path).name
    for kind, source in (generation.provenance.get("controls") or {}).items():  # the framework's own files
        target = _control_file(folder, kind, Path(source).suffix)
        media.copy_file_atomic(source, target, overwrite=overwrite)
        written[kind] = target.name
    if written:
        generation.provenance["control_files"] = written


class SpecRunner(AbstractContextManager):
    """Run samples on one backend and profile into one output folder (the transfer notebook's runner). The backend is
    built now, so a missing checkout or URL is reported at once; ``vllm-omni`` without ``server_url`` starts a local
    server with the transfer hook on loopback (it shares this filesystem) at the first run, stopped by :meth:`close`."""

    def __init__(self, backend: str = "diffusers", *, profile: str = DEFAULT_PROFILE, model: str | None = None,
                 output_dir: str | os.PathLike[str] = "outputs/transfer", checkout: str | None = None,
                 server_url: str | None = None, overrides: Mapping[str, Any] | None = None,
                 guardrails: bool | None = None, overwrite: bool = False, progress: bool = True,
                 compute_controls: Mapping[str, str] | None = None, control_device: str | None = None) -> None:
        self.profile, self.model, self.guardrails = profile, model, guardrails
        self.compute_controls, self.control_device = dict(compute_controls or {}), control_device
        self.output_dir, self.server_url = Path(output_dir), server_url
        self.overrides, self.overwrite, self.progress = dict(overrides or {}), overwrite, progress
        self._server = None
        self._backend = None if backend == VLLM and not server_url else backend_by_name(
            backend, url=server_url, checkout=checkout, progress=progress)
        self.backend = backend

    def __repr__(self) -> str:
        return f"SpecRunner({self.backend!r}, profile={self.profile!r}, output_dir={str(self.output_dir)!r})"

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = self._backend = None

    def run(self, spec: Sample | Mapping[str, Any] | str | os.PathLike[str],
            overrides: Mapping[str, Any] | None = None, compute_controls: Mapping[str, str] | None = None
            ) -> Generation:
        """One sample, as :func:`run_spec` runs it; ``overrides`` and ``compute_controls`` add to the runner's
        (``resolution="256"`` gives vLLM-Omni a tier it knows with the ``tiny`` profile)."""
        if self._backend is None:
            self._backend = backend_by_name(self.backend, url=self._start_server(), progress=self.progress)
        return run_spec(spec, backend=self._backend, profile=self.profile, model=self.model, out=self.output_dir,
                        overrides={**self.overrides, **(overrides or {})}, guardrails=self.guardrails,
                        overwrite=self.overwrite, progress=self.progress, server_paths=self._server is not None,
                        compute_controls={**self.compute_controls, **(compute_controls or {})} or None,
                        control_device=self.control_device)

    def _start_server(self) -> str:
        """A loopback server this process starts for its own inputs: it may open them by path (server_paths), and its
        guardrail switch is on, so each request's own choice (the run's, in extra_params) decides."""
        from ..standins.vllm_omni.local import ThreadedServer  # FastAPI and uvicorn load on first use
        from ..standins.vllm_omni.transfer import make_transfer_runner

        model = model_for(self.profile, self.model)
        self._server = ThreadedServer(model=model, warmup=False, guardrails=True,
                                      transfer_runner=make_transfer_runner(model, guardrails=True),
                                      allowed_local_media_paths=(str(Path("/")),)).start()
        return self._server.url
