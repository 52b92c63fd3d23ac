"""``run_spec``: one framework input sample, any mode, any backend, saved where the framework would put it.

``run_spec(sample, backend=..., profile=..., out=...)`` resolves the sample (the framework's defaults; the profile
fills what the sample leaves unset; command-line overrides win), refuses what the backend cannot honour, and
writes ``<out>/<name>/vision.mp4`` (``vision.jpg`` for one frame) with its manifest ``vision.json`` and, for a
transfer on diffusers or the framework, ``control_<hint>.mp4``. The manifest's fingerprint covers the input as
written, the overrides, profile, model and the content of every input file, so a rerun skips a finished output
and never mistakes another input's output for it (:func:`~cosmos_helpers.result.find_saved`).

Generation modes become a :class:`~cosmos_helpers.request.GenerationRequest` on diffusers and vLLM-Omni; transfer
runs the diffusers transfer or the vLLM-Omni transfer form; ``audio_image2video`` runs the experimental diffusers
loop; the framework backend runs the sample unchanged. :class:`SpecRunner` is the notebook's convenience: one
backend, profile and output folder for several samples, and a local vLLM-Omni server when no URL is given.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from .. import media
from ..backends import NAMES as BACKENDS
from ..backends import backend_by_name
from ..errors import OutputExistsError, ValidationError
from ..presets import get_profile
from ..protocol import framework as fw
from ..result import MANIFEST_SUFFIX, MEDIA_SUFFIXES, FinishedFile, Generation, find_saved
from ..specs.load import Sample, as_sample, load_inputs
from ..specs.resolve import ResolvedSample
from ..specs.runs import GENERATION_MODES, SampleRun, check_backend, generation_request, given_fields, localize
from .vllm import make_transfer_runner, send_transfer

STEM = "vision"


def run_spec(spec: Sample | Mapping[str, Any] | str | os.PathLike[str], *, backend: Any = "diffusers",
             profile: str | None = "tiny", model: str | None = None, out: str | os.PathLike[str] = "outputs",
             overrides: Mapping[str, Any] | None = None, overwrite: bool = False, progress: bool = True,
             checkout: str | os.PathLike[str] | None = None, url: str | None = None,
             server_paths: bool = False) -> Generation:
    """Run one sample and save it as ``<out>/<name>/vision.*``; a finished identical run is loaded instead.

    Args:
        spec: a :class:`~cosmos_helpers.specs.Sample`, a dict, or a one-sample input file.
        backend: ``"diffusers"``, ``"framework"``, ``"vllm-omni"``, or a backend object (``DiffusersBackend``,
            ``FrameworkBackend``, ``VllmOmniBackend``) to run on.
        profile: fills the tier, frames and steps the sample leaves unset (``tiny`` on a CPU); ``None``: the
            framework's own defaults. It also picks the model unless ``model`` is given.
        overrides: ``resolution``, ``num_steps``, ``seed``: win over the sample (the framework's CLI flags).
        checkout / url: where the framework / the vLLM-Omni server is, when ``backend`` is a name.
        server_paths: vLLM-Omni only: the server shares this filesystem, so controls beyond the uploaded one may be
            sent as paths.
    """
    sample = as_sample(spec)
    runner = backend_by_name(backend, checkout=checkout, url=url, progress=progress) if isinstance(
        backend, str) else backend
    name = runner.name
    folder = Path(out) / sample.name
    if name == "framework":  # it applies its own defaults to the sample: the profile only chooses the model
        model, profile = model or (get_profile(profile).model if profile else None), None
    # An unseeded sample's seed comes from its output folder: ours here, the framework's run folder there.
    resolved = sample.resolved(profile=profile, model=model, overrides=overrides,
                               output_dir=folder if name != "framework" else None)
    given = given_fields(sample, overrides)
    check_backend(sample, resolved, name, given)
    if name != "framework":
        resolved = localize(resolved, progress=progress)
    run = SampleRun.create(sample, resolved, overrides)
    stem = folder / STEM
    if not overwrite:
        done = find_saved(stem, run, backend=name)
        if done is not None:
            generation = Generation.load(done)
            generation.request, generation.provenance["skipped"] = run, True
            return generation
        _refuse_other_output(stem)
    generation = execute(run, runner, progress=progress, server_paths=server_paths)
    generation.request = run
    generation.save(stem, overwrite=overwrite)
    _save_controls(generation, folder, overwrite)
    return generation


def run_inputs(path: str | os.PathLike[str], **kwargs: Any) -> list[Generation]:
    """Every sample of an input file (``.json`` object or list, ``.jsonl``), in order, through :func:`run_spec`."""
    return [run_spec(sample, **kwargs) for sample in load_inputs(path)]


def execute(run: SampleRun, backend: Any, *, progress: bool = True, server_paths: bool = False) -> Generation:
    """Make the output of a checked run on a backend object (no saving): the dispatch by mode and backend."""
    r = run.resolved
    if backend.name == "framework":
        return backend.run_sample(run)
    if r.is_transfer:
        if backend.name == "diffusers":
            from .diffusers_transfer import run_transfer  # OpenCV and the modular blocks load on first use

            generation = run_transfer(r, backend=backend, guardrails=_guardrails(r), progress=progress)
            return framework_file(generation, r)
        return send_transfer(backend, r, run.given, server_paths=server_paths)
    if r.model_mode in fw.SOUND_CONDITION_MODES:
        from .audio import run_audio_sample  # scipy and the sound tokenizer load on first use

        return framework_file(run_audio_sample(r, backend=backend, progress=progress), r)
    if r.model_mode not in GENERATION_MODES:  # check_backend refuses these first; keep the dispatch total
        raise ValidationError("model_mode", f"{r.model_mode} does not run on {backend.name}.",
                              "use the framework backend.")
    request = generation_request(r, run.given)
    generation = backend.generate(request)
    return framework_file(generation, r) if backend.name == "diffusers" else generation


def framework_file(generation: Generation, r: ResolvedSample) -> Generation:
    """Encode an in-process result as the framework saves it: ``vision.jpg`` at ``image_save_quality``, ``vision.mp4``
    at the H.264 quality matching ``video_save_quality`` (10 -> CRF 18, each step down +3)."""
    if generation.is_image:
        data = media.image_bytes(generation.frames[0], "JPEG", quality=r.image_save_quality)
        generation.finished = FinishedFile(".jpg", data=data)
        return generation
    crf = 18 + 3 * (10 - int(r.video_save_quality))
    if crf != 18:  # Generation.save encodes at CRF 18 itself
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            path = media.write_mp4(Path(tmp) / "vision.mp4", generation.frames, generation.fps, sound=generation.sound,
                                   sample_rate=generation.sample_rate, crf=crf)
            generation.finished = FinishedFile(".mp4", data=path.read_bytes())
    return generation


def _guardrails(r: ResolvedSample) -> bool:
    return bool(r.profile and get_profile(r.profile).guardrails)


def _refuse_other_output(stem: Path) -> None:
    """Before any work: an output at ``stem`` that is not this run's is never overwritten without ``overwrite``."""
    existing = [stem.with_suffix(s) for s in (MANIFEST_SUFFIX, *MEDIA_SUFFIXES) if stem.with_suffix(s).exists()]
    if existing:
        raise OutputExistsError(f"{existing[0]} is the output of another input or setting; pass overwrite=True "
                                "(--overwrite), or choose another output folder.")


def _save_controls(generation: Generation, folder: Path, overwrite: bool) -> None:
    controls = getattr(generation, "controls", None) or {}
    for kind, frames in controls.items():  # the diffusers transfer: the maps it followed, as the framework saves
        media.write_mp4(folder / fw.CONTROL_FILE.format(hint=kind, suffix=".mp4"), frames, generation.fps,
                        overwrite=True)
    for kind, path in (generation.provenance.get("controls") or {}).items():  # the framework's own control files
        media.copy_file_atomic(path, folder / Path(path).name, overwrite=True)


class SpecRunner:
    """Run samples on one backend with one profile into one output folder (what the transfer notebook uses).

    For ``vllm-omni`` without ``server_url`` a local vLLM-Omni-compatible server with the transfer hook is started
    on loopback (it shares this filesystem) and stopped by :meth:`close`.
    """

    def __init__(self, backend: str = "diffusers", *, profile: str = "tiny", model: str | None = None,
                 output_dir: str | os.PathLike[str] = "outputs/transfer", checkout: str | None = None,
                 server_url: str | None = None, overrides: Mapping[str, Any] | None = None, overwrite: bool = False,
                 progress: bool = True) -> None:
        if backend not in BACKENDS:
            raise ValidationError("backend", f"unknown backend {backend!r}.", f"use one of {', '.join(BACKENDS)}.")
        if backend == "framework" and not checkout:
            raise ValidationError("framework_checkout", "the framework backend needs a cosmos-framework checkout.",
                                  "set framework_checkout to its path (on a GPU host), or use backend='diffusers'.")
        self.backend, self.profile, self.model, self.checkout = backend, profile, model, checkout
        self.output_dir, self.server_url = Path(output_dir), server_url
        self.overrides, self.overwrite, self.progress = dict(overrides or {}), overwrite, progress
        self._server = None

    def __repr__(self) -> str:
        return f"SpecRunner({self.backend!r}, profile={self.profile!r}, output_dir={str(self.output_dir)!r})"

    def __enter__(self) -> SpecRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def url(self) -> str:
        if self.server_url:
            return self.server_url
        if self._server is None:
            from ..server.local import ThreadedServer  # FastAPI and uvicorn load on first use

            model = self.model or _profile_model(self.profile)
            # A loopback server this process starts for its own inputs: it may open them by path (server_paths).
            self._server = ThreadedServer(model=model, warmup=False, transfer_runner=make_transfer_runner(model),
                                          allowed_local_media_paths=(str(Path("/")),)).start()
        return self._server.url

    def run(self, spec: Sample | Mapping[str, Any] | str | os.PathLike[str],
            overrides: Mapping[str, Any] | None = None) -> Generation:
        """Run one sample (a :class:`Sample`, a dict or a one-sample file); see :func:`run_spec`. ``overrides`` add
        to the runner's (``resolution="256"`` gives vLLM-Omni a tier it knows with the ``tiny`` profile)."""
        url = self.url() if self.backend == "vllm-omni" else None
        return run_spec(spec, backend=self.backend, profile=self.profile, model=self.model, out=self.output_dir,
                        overrides={**self.overrides, **(overrides or {})}, overwrite=self.overwrite,
                        progress=self.progress, checkout=self.checkout, url=url,
                        server_paths=self._server is not None)


def _profile_model(profile: str | None) -> str:
    return get_profile(profile).model if profile else "tiny"


__all__ = ["BACKENDS", "SpecRunner", "execute", "framework_file", "run_inputs", "run_spec"]
