"""``run_spec``: one framework input sample, any mode, any backend, saved where the framework would put it.

``run_spec(sample, backend=..., profile=..., out=...)`` resolves the sample (the framework's defaults; the profile
fills what the sample leaves unset, except on the framework, which applies its own; command-line overrides win),
refuses what the backend cannot honour, makes sure the output folder is free for it, and only then works: it
writes ``<out>/<name>/vision.mp4`` (``vision.jpg`` for one frame) with its manifest ``vision.json`` and, for a
transfer on diffusers or the framework, ``control_<hint>.mp4`` (named in the manifest). The manifest's fingerprint
covers the input as written, the overrides, profile, model and the content of every input file, so a rerun skips
a finished output and never mistakes another input's output for it (:func:`~cosmos_helpers.result.check_free`).
``dry_run=True`` stops before any work and returns what would run.

Generation modes become a :class:`~cosmos_helpers.request.GenerationRequest` on diffusers and vLLM-Omni; transfer
runs the diffusers transfer or the vLLM-Omni transfer form; ``audio_image2video`` runs the experimental diffusers
loop; the framework backend runs the sample unchanged. :class:`SpecRunner` is the notebook's convenience: one
backend, profile and output folder for several samples, and a local vLLM-Omni server when no URL is given.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from .. import media
from ..backends import SAMPLE_BACKENDS, backend_by_name
from ..backends.diffusers.distilled import is_distilled_model
from ..backends.vllm_wire import refuse_request_cache
from ..controls.estimation import check_models
from ..controls.videos import write_control_videos
from ..errors import OutputExistsError, ValidationError
from ..presets import DEFAULT_PROFILE, MODES, model_for
from ..protocol import framework as fw
from ..schedules import configure_scheduler
from ..result import MANIFEST_SUFFIX, FinishedFile, Generation, check_free, read_manifest
from ..workflow import output_settings
from ..specs.load import Sample, as_sample
from ..specs.resolve import ResolvedSample
from ..specs.runs import SampleRun, check_backend, generation_request, given_fields, localize
from ..step_cache import StepCache, check_for_backend, check_step_cache
from .estimated import control_folder, with_computed_controls
from .vllm import BACKEND as VLLM
from .vllm import check_transfer, transfer_form

STEM = "vision"
_CONTROL_SUFFIXES = (".mp4", ".jpg")  # the framework saves a control like the output (args.py vision_extension)


def run_spec(spec: Sample | Mapping[str, Any] | str | os.PathLike[str], *, backend: Any = "diffusers",
             profile: str | None = DEFAULT_PROFILE, model: str | None = None, out: str | os.PathLike[str] = "outputs",
             overrides: Mapping[str, Any] | None = None, guardrails: bool | None = None, overwrite: bool = False,
             progress: bool = True, checkout: str | os.PathLike[str] | None = None, url: str | None = None,
             server_paths: bool = False, dry_run: bool = False, compute_controls: Mapping[str, str] | None = None,
             control_device: str | None = None, step_cache: StepCache = None) -> Any:
    """Run one sample and save it as ``<out>/<name>/vision.*``; a finished identical run is loaded instead.

    Args:
        spec: a :class:`~cosmos_helpers.specs.Sample`, a dict, or a one-sample input file.
        backend: ``"diffusers"``, ``"framework"``, ``"vllm-omni"``, or a backend object (``DiffusersBackend``,
            ``FrameworkBackend``, ``VllmOmniBackend``) to run on.
        profile: picks the model (unless ``model``) and the guardrails (unless ``guardrails``) and fills the tier,
            frames and steps the sample leaves unset (``tiny`` on a CPU); on the framework it only picks.
        overrides: ``resolution``, ``num_steps``, ``seed``: win over the sample (the framework's CLI flags).
        guardrails: run the Cosmos guardrails; ``None``: the profile's choice.
        checkout / url: where the framework / the vLLM-Omni server is, when ``backend`` is a name.
        server_paths: vLLM-Omni only: the server shares this filesystem, so controls beyond the uploaded one may be
            sent as paths.
        compute_controls: ``{"depth": MODEL, "seg": MODEL}``: compute those controls from ``vision_path`` with the
            ``transformers`` models named (``"tiny"``: the offline stand-ins) into ``<out>/<name>/estimated_<kind>.mp4``
            and run with them as supplied controls (:mod:`cosmos_helpers.transfer.estimated`); ``control_device``
            is where those models run (default CUDA when there is one).
        step_cache: ``None`` (the backend's own default: on in the framework's command line, off elsewhere),
            ``"off"`` or a :class:`~cosmos_helpers.SeaCache`: on the framework its ``--[no-]diffusion-cache`` flags,
            on diffusers its SeaCache hooks; vLLM-Omni takes it when its server starts, so there it is refused.
        dry_run: do no work: return the framework's written run folder (a ``FrameworkRun``: input file and
            command, for a job submitted elsewhere) or, on the other backends, the checked :class:`SampleRun`
            (URL inputs are not downloaded).

    Returns:
        the saved (or reused) :class:`~cosmos_helpers.result.Generation`; with ``dry_run`` see above.
    """
    if compute_controls:
        check_models(compute_controls)  # the kinds first: a sample gets an empty hint of each
    sample = as_sample(spec, computed=tuple(compute_controls or ()))
    step_cache = check_step_cache(step_cache)
    runner = backend_by_name(backend, checkout=checkout, url=url, progress=progress) if isinstance(
        backend, str) else backend
    name = runner.name
    unchanged = name in SAMPLE_BACKENDS  # the framework (its CLI or its Ray Serve app) runs the sample as written
    folder = Path(out) / sample.name
    if compute_controls:
        if dry_run and name == "framework":
            raise ValidationError("compute_controls", "a framework dry run writes an input file for elsewhere, and the "
                                  "controls it names are not computed yet.", "run without dry_run, or compute them "
                                  "first (run_spec on any backend) and name them as control_path.")
        sample = with_computed_controls(sample, compute_controls, control_folder(out, sample.name))
    # The framework applies its own defaults to the sample: the profile only picks the model and the guardrails.
    # An unseeded sample's seed comes from its output folder: ours here, the framework's run folder (or the Ray
    # Serve app's draw) there.
    resolved = sample.resolved(profile=profile, model=model, overrides=overrides, guardrails=guardrails,
                               output_dir=None if unchanged else folder, fill=not unchanged)
    given = given_fields(sample, overrides, resolved)
    check_backend(sample, resolved, name, given)
    check_run_cache(step_cache, name, resolved)
    _check_scheduler(runner, resolved, given)
    if not unchanged and not dry_run:
        resolved = localize(resolved, progress=progress)
        if name == VLLM and resolved.is_transfer and compute_controls:  # the form's checks, before the models run
            check_transfer(resolved, given, server_paths=server_paths)
    if compute_controls and not dry_run and not overwrite:
        _check_same_input(folder / STEM, sample)
    if compute_controls and not dry_run:
        write_control_videos(resolved.vision_path, compute_controls, folder, max_frames=resolved.max_frames,
                             device=control_device, overwrite=overwrite, progress=progress)
    run = SampleRun.create(sample, resolved, overrides, step_cache)
    if dry_run:
        return runner.prepare_sample(run) if unchanged else run
    stem = folder / STEM
    if not overwrite:
        done = check_free(stem, run, backend=name, settings=output_settings(runner))
        if done is not None:
            generation = Generation.load(done)
            generation.request, generation.provenance["skipped"] = run, True
            return generation
        _check_controls_free(folder, resolved)
    generation = execute(run, runner, progress=progress, server_paths=server_paths)
    generation.request, generation.settings = run, output_settings(runner)
    _save_controls(generation, folder, overwrite)
    generation.save(stem, overwrite=overwrite)
    return generation


def _check_scheduler(runner: Any, r: ResolvedSample, given: set[str]) -> None:
    """A scheduler instance given to the diffusers backend, against the sample, before any work. Transfer and
    audio samples run the framework's own sampler there (it would be left unused while the manifest named it); a
    generation sample sends its shift, the framework's default where it sets none, which the instance must share."""
    scheduler = getattr(runner, "scheduler", None)
    if runner.name != "diffusers" or scheduler is None:
        return
    if r.is_transfer or r.model_mode in fw.SOUND_CONDITION_MODES:
        raise ValidationError("scheduler", f"a {r.model_mode} sample runs the framework's own sampler (flow UniPC "
                              "at the sample's shift) on diffusers; the backend's scheduler would not be used.",
                              "run it on a DiffusersBackend made without scheduler=.")
    if isinstance(scheduler, type) or is_distilled_model(r.model):
        return  # a class takes the sample's shift; the distilled path refuses any scheduler itself
    try:
        configure_scheduler({}, scheduler, r.shift, shift_given=True)
    except ValidationError as error:
        if error.field != "flow_shift":
            raise
        whose = "the sample's shift" if "shift" in given else "the framework's default shift for this sample"
        raise ValidationError("shift", f"{whose} is {r.shift:g}, and the backend's scheduler instance was built "
                              "with another.", "set shift in the sample to the scheduler's, or build the "
                              "scheduler with this shift.") from None


def check_run_cache(step_cache: StepCache, backend: str, r: ResolvedSample) -> None:
    """Refuse, before any work, a run's step cache the backend cannot honour for this sample."""
    if step_cache is None:
        return
    if backend == VLLM:
        refuse_request_cache(step_cache)
    check_for_backend(step_cache, backend)
    if backend == "diffusers" and r.model_mode in fw.SOUND_CONDITION_MODES:
        raise ValidationError("step_cache", f"the experimental {r.model_mode} loop on diffusers runs every step: it "
                              "has no step cache.", "leave step_cache out (--step-cache), or run the sample on the "
                              "framework.")


def execute(run: SampleRun, backend: Any, *, progress: bool = True, server_paths: bool = False) -> Generation:
    """Make the output of a checked run on a backend object (no saving): the dispatch by mode and backend."""
    r = run.resolved
    if backend.name in SAMPLE_BACKENDS:
        return backend.run_sample(run)
    check_run_cache(run.step_cache, backend.name, r)
    if r.is_transfer:
        if backend.name == "diffusers":
            from ..backends.diffusers.transfer import run_transfer  # OpenCV and the modular blocks load on first use

            return framework_file(run_transfer(r, backend=backend, progress=progress, step_cache=run.step_cache), r)
        fields, files = transfer_form(r, run.given, server_paths=server_paths)
        return backend.send_video_form(fields, files, what="transfer", model=r.model)  # checks the server's model
    if r.model_mode in fw.SOUND_CONDITION_MODES:
        from ..backends.diffusers.audio import run_audio_sample  # scipy and the sound tokenizer load on first use

        return framework_file(run_audio_sample(r, backend=backend, progress=progress), r)
    if r.model_mode not in MODES + fw.ACTION_MODES:  # check_backend refuses the others first; keep the dispatch total
        raise ValidationError("model_mode", f"{r.model_mode} does not run on {backend.name}.",
                              "use the framework backend.")
    generation = backend.generate(generation_request(r, run.given, run.step_cache))
    return framework_file(generation, r) if backend.name == "diffusers" else generation


def framework_file(generation: Generation, r: ResolvedSample) -> Generation:
    """Save an in-process result as the framework saves it: ``vision.jpg`` at ``image_save_quality``, ``vision.mp4``
    at the CRF its ``video_save_quality`` gives (``protocol.framework.video_crf``)."""
    if generation.is_image:
        data = media.image_bytes(generation.frames[0], "JPEG", quality=r.image_save_quality)
        generation.finished = FinishedFile(".jpg", data=data)
    else:
        generation.crf = fw.video_crf(r.video_save_quality)
    return generation


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
    for kind in r.hint_kinds:
        for suffix in _CONTROL_SUFFIXES:
            path = _control_file(folder, kind, suffix)
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


class SpecRunner:
    """Run samples on one backend with one profile into one output folder (what the transfer notebook uses).

    The backend is built once, by :func:`cosmos_helpers.backends.backend_by_name` (so a missing checkout or URL is
    reported now). For ``vllm-omni`` without ``server_url`` a local vLLM-Omni-compatible server with the transfer
    hook is started on loopback at the first run (it shares this filesystem) and stopped by :meth:`close`.
    """

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
        # A local server starts at the first run; every other backend is built (and checked) now.
        self._backend = None if backend == "vllm-omni" and not server_url else backend_by_name(
            backend, url=server_url, checkout=checkout, progress=progress)
        self.backend = backend

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
            self._backend = None

    def run(self, spec: Sample | Mapping[str, Any] | str | os.PathLike[str],
            overrides: Mapping[str, Any] | None = None, compute_controls: Mapping[str, str] | None = None
            ) -> Generation:
        """Run one sample (a :class:`Sample`, a dict or a one-sample file); see :func:`run_spec`. ``overrides`` add
        to the runner's (``resolution="256"`` gives vLLM-Omni a tier it knows with the ``tiny`` profile), and
        ``compute_controls`` to the runner's (``{"depth": "tiny"}``)."""
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
