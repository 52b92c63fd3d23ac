"""``FrameworkBackend``: run Cosmos 3 through an NVIDIA/cosmos-framework checkout's inference CLI.

For users on a GPU host with the framework installed. Each run writes its input into a fresh run folder and
launches::

    python -m cosmos_framework.scripts.inference -i <run>/<name>.json -o <run>/out --checkpoint-path Cosmos3-Nano

(``torchrun --nproc-per-node G -m ...`` for ``gpus > 1``; ``--guardrails`` or ``--no-guardrails`` as the request
or the run says, never the framework's default silently) in the checkout, streams the log with a progress bar
(step counters such as ``12/35`` are parsed when the framework prints them), and takes the framework's own output,
``<run>/out/<name>/vision.mp4`` (``vision.jpg`` for one frame), as the result's finished file, byte for byte.

The model comes from the request (or the run of an input file): a hub id maps to its ``--checkpoint-path`` name
(``protocol.framework.CHECKPOINTS``), a local folder passes as a path, ``"tiny"`` is refused (the framework cannot
run this project's embedded model). A framework input file runs *unchanged*: its sample is written as it came,
paths made absolute, and command-line overrides go on the framework's own command line (``--resolution``,
``--num-steps``, ``--seed``), which the framework merges over the sample. A :class:`GenerationRequest` becomes a
sample holding only what the request says; options left to the backend's default stay unset, so the framework's
own defaults apply (its negative caption file, its templates). :meth:`FrameworkBackend.prepare` writes a run folder
without launching, for tests and for jobs submitted elsewhere.

The interpreter is ``python=``, else ``$COSMOS_FRAMEWORK_PYTHON``, else the checkout's ``.venv/bin/python`` (what
``uv sync`` creates), else this Python. ``module=`` / ``$COSMOS_FRAMEWORK_MODULE`` replace the module name; tests
use that to point the backend at a stand-in program with the same command-line contract.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .. import media
from ..errors import BackendUnavailableError, FrameworkRunError, ValidationError
from ..models.tiny_distilled import MODEL_NAME as TINY_DISTILLED
from ..models.tiny_edge import MODEL_NAME as TINY_EDGE
from ..precision import describe as describe_precision
from ..precision import framework_flags, precision_record
from ..presets import SOUND_SAMPLE_RATE, bucket_of
from ..progress import progress_bar
from ..protocol import action as ap
from ..protocol import framework as fw
from ..request import GenerationRequest
from ..result import FinishedFile, Generation
from ..trajectories import save_trajectory

NAME = "framework"
PYTHON_ENV = "COSMOS_FRAMEWORK_PYTHON"
MODULE_ENV = "COSMOS_FRAMEWORK_MODULE"
LOG_TAIL_LINES = 40
_STEP_PATTERN = re.compile(r"(?<![\d.])(\d{1,5})\s*/\s*(\d{1,5})(?![\d.])")

INSTALL_HELP = (
    "The Cosmos Framework is not usable at {where}. It runs on a Linux host with NVIDIA GPUs: "
    "`git clone https://github.com/NVIDIA/cosmos-framework.git`, then inside the checkout "
    "`GIT_LFS_SKIP_SMUDGE=1 uv sync --all-extras --group=cu128-train` (cu130-train on aarch64), and "
    "`hf auth login` with access to the Cosmos3 checkpoints. Then use FrameworkBackend('/path/to/cosmos-framework') "
    "(it runs the checkout's .venv/bin/python), or set {env} to the interpreter that imports cosmos_framework. "
    "Without a GPU host, use DiffusersBackend or VllmOmniBackend instead."
)


def checkpoint_for(model: str) -> str:
    """The ``--checkpoint-path`` of a model: a framework checkpoint name, or a local folder's absolute path."""
    model = str(model)
    if model in ("tiny", TINY_DISTILLED, TINY_EDGE):
        raise ValidationError("model", f"the framework cannot run this project's embedded {model} model (diffusers' "
                              "format, not a framework checkpoint).", "use profile 'nano', 'super' or 'edge' (or a "
                              "model such as nvidia/Cosmos3-Nano), or run on diffusers.")
    if model in fw.CHECKPOINTS:
        return fw.CHECKPOINTS[model]
    if model in fw.CHECKPOINTS.values():
        return model
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve())
    raise ValidationError("model", f"{model!r} is neither a framework checkpoint nor a local folder.",
                          f"use one of {', '.join(fw.CHECKPOINTS)} or a checkpoint folder.")


@dataclass(frozen=True)
class FrameworkRun:
    """A written run folder: the input file, where the framework writes, and the exact command."""

    folder: Path
    input_file: Path
    out_dir: Path
    name: str
    command: tuple[str, ...]
    payload: Mapping[str, Any] = field(repr=False)
    overrides: Mapping[str, Any] = field(default_factory=dict)

    @property
    def seed(self) -> int:
        """The seed the framework uses: ``--seed``, the sample's, else its fallback from name and output folder."""
        seed = next((v for v in (self.overrides.get("seed"), self.payload.get("seed")) if v is not None), None)
        return fw.fallback_seed(self.name, self.sample_dir.absolute()) if seed is None else int(seed)

    @property
    def sample_dir(self) -> Path:
        """``<out>/<name>``: the framework's folder for the sample (``vision.mp4`` / ``vision.jpg``, controls)."""
        return self.out_dir / self.name


class FrameworkBackend:
    """Run framework input samples and :class:`GenerationRequest` s through ``cosmos_framework.scripts.inference``.

    Args:
        checkout: the NVIDIA/cosmos-framework checkout (the working directory of every run).
        gpus: GPUs per run; more than 1 launches ``torchrun --nproc-per-node gpus``.
        parallelism_preset: ``latency`` or ``throughput``; ``None`` leaves the framework's default.
        python: interpreter that imports ``cosmos_framework`` (default: see the module docstring).
        guardrails: ``False`` adds ``--no-guardrails`` (as does a request with ``guardrails=False``).
        extra_args: more CLI flags, e.g. ``("--no-diffusion-cache",)`` for the exact sampler.
        work_dir: where run folders go (default ``<checkout>/outputs/cosmos_helpers``).
        module: the module to run (default ``cosmos_framework.scripts.inference`` or ``$COSMOS_FRAMEWORK_MODULE``).
        progress: show a progress bar while the run streams its log.
        env: extra environment variables for the run; timeout: seconds before a run is killed.

    The model and the guardrails are not arguments: they are the request's (``GenerationRequest(profile=...,
    model=..., guardrails=...)``) or the run's (``run_spec(..., guardrails=...)``), as on every backend.
    """

    name = NAME

    def __init__(self, checkout: str | os.PathLike[str], *, gpus: int = 1, parallelism_preset: str | None = None,
                 python: str | os.PathLike[str] | None = None, extra_args: Sequence[str] = (),
                 work_dir: str | os.PathLike[str] | None = None, module: str | None = None, progress: bool = True,
                 env: dict[str, str] | None = None, timeout: float | None = None, checkpoint: Any = None,
                 guardrails: Any = None) -> None:
        if checkpoint is not None:
            raise ValidationError("checkpoint", "FrameworkBackend runs the model each request names, so it takes none.",
                                  f"choose it in the request: GenerationRequest(..., model={checkpoint!r}) or "
                                  "profile='nano'/'super'/'edge' (or `cosmos-helpers run --model`).")
        if guardrails is not None:
            raise ValidationError("guardrails", "FrameworkBackend runs the guardrails each request asks for, so it "
                                  "takes no setting of its own (one that could contradict the request).",
                                  f"set them in the request: GenerationRequest(..., guardrails={guardrails!r}) or "
                                  f"run_spec(..., guardrails={guardrails!r}) (`cosmos-helpers run --no-guardrails`).")
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
            raise ValidationError("gpus", f"must be a positive integer, got {gpus!r}.", "use 1, 2, 4 or 8.")
        if parallelism_preset is not None and parallelism_preset not in fw.PARALLELISM_PRESETS:
            raise ValidationError("parallelism_preset", f"unknown preset {parallelism_preset!r}.",
                                  f"use one of {', '.join(fw.PARALLELISM_PRESETS)}, or None for the framework's.")
        self.checkout = Path(checkout).expanduser().resolve()
        self.gpus, self.parallelism_preset = gpus, parallelism_preset
        self._python = None if python is None else str(python)
        self.extra_args = tuple(str(a) for a in extra_args)
        self.work_dir = (Path(work_dir).expanduser().resolve() if work_dir
                         else self.checkout / "outputs" / "cosmos_helpers")
        self.module = module or os.environ.get(MODULE_ENV) or fw.MODULE
        self.progress, self.env, self.timeout = progress, dict(env or {}), timeout

    def __repr__(self) -> str:
        return f"FrameworkBackend({str(self.checkout)!r}, gpus={self.gpus}, module={self.module!r})"

    # Command line -----------------------------------------------------------------------------------

    @property
    def python(self) -> str:
        """The interpreter: ``python=``, ``$COSMOS_FRAMEWORK_PYTHON``, ``<checkout>/.venv/bin/python``, this Python."""
        if self._python:
            return self._python
        if os.environ.get(PYTHON_ENV):
            return os.environ[PYTHON_ENV]
        venv = self.checkout / ".venv" / "bin" / "python"
        return str(venv) if venv.exists() else sys.executable

    def launcher(self) -> list[str]:
        """``[python, -m, module]`` or ``[torchrun, --nproc-per-node, G, -m, module]``."""
        if self.gpus == 1:
            return [self.python, "-m", self.module]
        torchrun = Path(self.python).parent / "torchrun"
        head = [str(torchrun)] if torchrun.exists() else [self.python, "-m", "torch.distributed.run"]
        return [*head, "--nproc-per-node", str(self.gpus), "-m", self.module]

    def command(self, input_file: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, model: str,
                guardrails: bool, overrides: Mapping[str, Any] | None = None, flags: Sequence[str] = ()) -> list[str]:
        """The exact command line of one run; ``overrides`` are sample fields given as the framework's own flags;
        ``guardrails`` is always said (``--guardrails`` / ``--no-guardrails``); ``flags`` are the request's own
        (``--quantization-method``, :func:`cosmos_helpers.precision.framework_flags`)."""
        request_flags, flags = list(flags), fw.CLI_FLAGS
        tier = (overrides or {}).get("resolution")
        if tier is not None and str(tier) not in fw.TIERS:
            raise ValidationError("resolution", f"the framework knows the tiers {', '.join(fw.TIERS)}, not {tier!r}.",
                                  "override the resolution with a framework tier (128 is this project's CPU tier).")
        cmd = [*self.launcher(), flags["input"], str(input_file), flags["output"], str(out_dir),
               flags["checkpoint"], checkpoint_for(model)]
        for key, value in (overrides or {}).items():
            if value is not None:
                cmd += [flags[key], str(value)]
        if self.parallelism_preset:
            cmd += [flags["parallelism"], self.parallelism_preset]
        cmd.append(flags["guardrails"] if guardrails else flags["no_guardrails"])
        return cmd + request_flags + list(self.extra_args)

    def check_available(self) -> None:
        """Raise :class:`BackendUnavailableError` (with install steps) unless the checkout can run the module."""
        python = self.python
        if not self.checkout.is_dir():
            raise self._unavailable("no such folder")
        if shutil.which(python) is None and not Path(python).exists():
            raise self._unavailable(f"interpreter {python} not found")
        probe = subprocess.run(
            [python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)",
             self.module], cwd=self.checkout, env=self._env(), capture_output=True, text=True, timeout=120)
        if probe.returncode != 0:
            raise self._unavailable(f"{python} cannot import {self.module}")

    def _unavailable(self, reason: Any) -> BackendUnavailableError:
        return BackendUnavailableError(INSTALL_HELP.format(where=f"{self.checkout} ({reason})", env=PYTHON_ENV))

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.checkout), env.get("PYTHONPATH", "")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    # Runs -------------------------------------------------------------------------------------------

    def prepare(self, payload: Mapping[str, Any], *, name: str, model: str, guardrails: bool,
                overrides: Mapping[str, Any] | None = None, flags: Sequence[str] = ()) -> FrameworkRun:
        """Write a run folder (``<name>.json`` holding ``payload`` as it is, ``command.txt``) without launching.

        The input file is named after the sample, so a sample without ``name`` gets that name from the framework
        (it names samples after their file) and the payload stays exactly the input.
        """
        checkpoint_for(model)  # refuse a model the framework cannot run before anything is written
        folder = self._new_run_dir(name)
        input_file = folder / f"{name}.json"
        out_dir = folder / "out"
        command = self.command(input_file, out_dir, model=model, overrides=overrides, guardrails=guardrails,
                               flags=flags)
        media.write_bytes_atomic(input_file, (json.dumps(dict(payload), indent=2, ensure_ascii=False) + "\n").encode())
        media.write_bytes_atomic(folder / "command.txt", (shlex.join(command) + "\n").encode())
        given = {k: v for k, v in (overrides or {}).items() if v is not None}
        return FrameworkRun(folder=folder, input_file=input_file, out_dir=out_dir, name=name, command=tuple(command),
                            payload=dict(payload), overrides=given)

    def launch(self, run: FrameworkRun, *, expected_steps: int | None = None) -> Path:
        """Run a prepared folder; returns the framework's ``vision.mp4`` / ``vision.jpg``."""
        self.check_available()
        log_path = run.folder / "run.log"
        self._stream(list(run.command), log_path, [expected_steps] if expected_steps else [], run.name)
        return _collect(run, log_path)

    def prepare_sample(self, sample_run: Any) -> FrameworkRun:
        """The run folder of one framework input sample, unchanged (a ``specs.SampleRun``: the sample, its resolved
        model and guardrails, the command-line overrides), without launching."""
        r = sample_run.resolved
        return self.prepare(sample_run.sample.payload(), name=sample_run.sample.name, model=r.model,
                            guardrails=r.guardrails, overrides=sample_run.overrides)

    def run_sample(self, sample_run: Any) -> Generation:
        """Run one framework input sample unchanged (see :meth:`prepare_sample`)."""
        r = sample_run.resolved
        return self._run(self.prepare_sample(sample_run), r.num_steps,
                         workflow="transfer" if r.is_transfer else r.model_mode, model=r.model)

    def generate(self, request: GenerationRequest, *, name: str | None = None) -> Generation:
        """Run a :class:`GenerationRequest` (t2i / t2v / i2v / v2v, with or without sound, or an action mode)."""
        name = name or f"{request.mode}_{request.fingerprint()[:8]}"
        flags = framework_flags(request.precision, request.model)  # refused before anything is written
        payload = request_payload(request, name=name, image_dir=self.work_dir / "inputs")
        run = self.prepare(payload, name=name, model=request.model, guardrails=bool(request.guardrails), flags=flags)
        generation = self._run(run, request.num_inference_steps, workflow=request.mode, model=request.model)
        generation.request = request
        generation.provenance["precision"] = describe_precision(request.precision, self.name)
        return generation

    def generate_many(self, requests: Sequence[GenerationRequest], *,
                      names: Sequence[str] | None = None) -> list[Generation]:
        """Run several requests in one framework run: one ``.jsonl`` input file (a sample per line, as
        ``common/args.py`` ``_from_file`` reads it), one process, one checkpoint load.

        On a GPU host loading a checkpoint takes minutes, so a notebook that makes several clips with one model
        should pay for it once. One command line runs one checkpoint with one guardrails setting, so requests that
        differ there are refused before anything is written. Each result is what :meth:`generate` would return,
        with the shared run folder in its provenance.
        """
        requests = list(requests)
        settings = {(r.model, bool(r.guardrails), json.dumps(precision_record(r.precision))) for r in requests}
        if len(settings) > 1:
            raise ValidationError("requests", f"one framework run loads one checkpoint with one guardrails setting "
                                  f"and one precision; these ask for {sorted(settings)} (model, guardrails, "
                                  "precision).", "group the requests by model, guardrails and precision, one "
                                  "generate_many call per group.")
        flags = framework_flags(requests[0].precision, requests[0].model) if requests else []
        names = list(names) if names is not None else [f"{r.mode}_{r.fingerprint()[:8]}" for r in requests]
        if not requests or len(names) != len(requests) or len(set(names)) != len(names):
            raise ValidationError("names", f"{len(requests)} requests need as many distinct sample names, got "
                                  f"{names}.", "give one distinct name per request, or leave names out.")
        payloads = [request_payload(r, name=n, image_dir=self.work_dir / "inputs") for r, n in zip(requests, names)]
        folder = self._new_run_dir(f"batch_{len(requests)}_{names[0]}")
        input_file, out_dir = folder / "samples.jsonl", folder / "out"
        command = self.command(input_file, out_dir, model=requests[0].model, guardrails=bool(requests[0].guardrails),
                               flags=flags)
        lines = "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in payloads)
        media.write_bytes_atomic(input_file, lines.encode())
        media.write_bytes_atomic(folder / "command.txt", (shlex.join(command) + "\n").encode())
        runs = [FrameworkRun(folder=folder, input_file=input_file, out_dir=out_dir, name=n, command=tuple(command),
                             payload=p) for n, p in zip(names, payloads)]
        started = time.perf_counter()
        self.check_available()
        log_path = folder / "run.log"
        self._stream(command, log_path, [r.num_inference_steps for r in requests], f"{len(runs)} samples")
        generations = []
        for run, request in zip(runs, requests):
            generation = self._generation(run, _collect(run, log_path), started, workflow=request.mode,
                                          model=request.model)
            generation.request = request
            generation.provenance["precision"] = describe_precision(request.precision, self.name)
            generations.append(generation)
        return generations

    def _run(self, run: FrameworkRun, expected_steps: int | None, *, workflow: str, model: str) -> Generation:
        started = time.perf_counter()
        path = self.launch(run, expected_steps=expected_steps)
        return self._generation(run, path, started, workflow=workflow, model=model)

    def output_settings(self) -> dict[str, Any]:
        """What, besides the request, shapes this backend's outputs: the extra flags and the parallelism preset."""
        return {"extra_args": list(self.extra_args), "parallelism_preset": self.parallelism_preset}

    def _generation(self, run: FrameworkRun, path: Path, started: float, *, workflow: str, model: str) -> Generation:
        """A finished sample's output read back, with where it came from."""
        if path.suffix == ".mp4":
            video = media.read_video(path, with_audio=True)
            frames, fps, sound, rate = video.frames, float(video.fps), video.sound, video.sample_rate
        else:
            frames, fps, sound, rate = media.read_image(path)[None], float(run.payload.get("fps") or 24), None, None
        controls = {p.stem.removeprefix("control_"): str(p) for p in sorted(path.parent.glob("control_*"))}
        return Generation(actions=predicted_actions(path.parent), settings=self.output_settings(),
            frames=frames, fps=fps, seed=run.seed, sound=sound,
            sample_rate=rate or SOUND_SAMPLE_RATE, backend=self.name, model=str(model),
            timings={"total_s": time.perf_counter() - started}, finished=FinishedFile(path.suffix, path=path),
            provenance={"workflow": workflow, "payload": dict(run.payload), "output": str(path), "controls": controls,
                        "command": shlex.join(run.command), "run_folder": str(run.folder),
                        "checkout": str(self.checkout)})

    def _new_run_dir(self, name: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60] or "run"
        self.work_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for index in range(1000):
            run_dir = self.work_dir / (f"{stamp}-{safe}" + (f"-{index}" if index else ""))
            with contextlib.suppress(FileExistsError):
                run_dir.mkdir()
                return run_dir
        raise FrameworkRunError(f"could not create a run folder under {self.work_dir}")

    def _stream(self, cmd: list[str], log_path: Path, steps: Sequence[int], name: str) -> None:
        """Run ``cmd``, writing its log and moving a bar over ``steps`` (each sample's step count, if known)."""
        bar = progress_bar(sum(steps) or None, f"framework {name}", "step", enabled=bool(self.progress))
        counter = _StepProgress(bar, steps)
        tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
        try:
            process = subprocess.Popen(cmd, cwd=self.checkout, env=self._env(), stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, bufsize=1, errors="replace")
        except OSError as exc:
            raise self._unavailable(exc) from exc
        timer = threading.Timer(self.timeout or 0, process.kill)
        if self.timeout:
            timer.start()
        try:
            with open(log_path, "w", encoding="utf-8") as log:
                assert process.stdout is not None
                for line in process.stdout:
                    log.write(line)
                    log.flush()
                    tail.append(line.rstrip("\n"))
                    counter.update(line)
            code = process.wait()
        finally:
            timer.cancel()
            if bar is not None:
                bar.close()
        if code != 0:
            raise FrameworkRunError(f"the Cosmos Framework run exited with code {code} (full log: {log_path}). "
                                    "Log tail:\n" + "\n".join(tail))


def predicted_actions(sample_dir: Path) -> np.ndarray | None:
    """The trajectory an action sample predicted: ``sample_outputs.json`` ``outputs[0].content.action``, already cut
    to the embodiment's width (inference.py:1796-1806)."""
    path = sample_dir / fw.SAMPLE_OUTPUTS
    if not path.is_file():
        return None
    outputs = json.loads(path.read_text(encoding="utf-8")).get("outputs") or [{}]
    action = (outputs[0].get("content") or {}).get("action")
    if action is None:
        return None
    array = np.asarray(action, dtype=np.float32)
    return array.reshape(-1, array.shape[-1])


def _collect(run: FrameworkRun, log_path: Path) -> Path:
    """The framework's output by its layout: ``<out>/<name>/vision.mp4`` or ``vision.jpg`` (args.py:437)."""
    for frames in (2, 1):
        path = run.sample_dir / fw.vision_file(frames)
        if path.is_file():
            return path
    found = sorted(p.relative_to(run.out_dir).as_posix() for p in run.out_dir.rglob("*") if p.is_file()) \
        if run.out_dir.is_dir() else []
    raise FrameworkRunError(f"the run finished but wrote no {run.sample_dir}/vision.mp4 or vision.jpg (it wrote: "
                            f"{', '.join(found[:10]) or 'nothing'}; full log: {log_path}).")


def request_payload(request: GenerationRequest, *, name: str, image_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The framework sample of a :class:`GenerationRequest`: what the request says, and nothing it leaves unset.

    Sizes must be a framework bucket; a ``guidance_interval`` (inclusive here) becomes the framework's strict
    ``(lo, hi)`` with the same timesteps (``protocol.framework.to_strict``); conditioning arrays are written to
    ``image_dir``.
    """
    if request.is_action:
        return _action_payload(request, name=name, folder=Path(image_dir))
    bucket = _check_request(request)
    payload: dict[str, Any] = {"name": name, "model_mode": request.mode,
                               "prompt": request.caption if isinstance(request.caption, str) else
                               json.dumps(request.caption, ensure_ascii=False)}
    negative = request.negative_prompt_text()
    if negative is not None:
        payload["negative_prompt"] = negative
    if bucket is not None:  # else an edit keeping its input's shape: the framework's default without either
        payload.update(resolution=bucket[0], aspect_ratio=bucket[1])
    payload.update(fps=int(request.fps), num_steps=request.num_inference_steps, guidance=request.guidance_scale,
                   shift=request.flow_shift, seed=request.seed)
    if not request.is_image:
        payload["num_frames"] = request.num_frames
    if request.sound:
        payload["enable_sound"] = True
    if request.guidance_interval is not None:
        payload["guidance_interval"] = list(fw.to_strict(request.guidance_interval))
    if request.mode in ("image2video", "image2image"):
        payload["vision_path"] = _media_path(request.image, request, Path(image_dir), ".png")
    if request.mode == "video2video":
        payload["vision_path"] = _media_path(request.video, request, Path(image_dir), ".mp4")
        if request.explicit("condition_frames"):
            payload["condition_frame_indexes_vision"] = list(request.condition_frames)
        if request.explicit("condition_video_keep"):
            payload["condition_video_keep"] = request.condition_video_keep
    return payload


def _action_payload(request: GenerationRequest, *, name: str, folder: Path) -> dict[str, Any]:
    """An action request as the framework's action sample (inputs/omni/action_*.json): ``image_size`` is the action
    tier, the trajectory a ``[T][D]`` JSON file (inference/action.py:56-58), policy is ``wam``."""
    if not float(request.fps).is_integer():
        raise ValidationError("fps", f"the framework's fps is an integer, not {request.fps:g}.",
                              f"use fps={math.floor(request.fps)} or {math.ceil(request.fps)}.")
    if request.use_system_prompt is not None:
        raise ValidationError("use_system_prompt", "the framework's system prompt is a model-config setting, not a "
                              "sample field.", "leave use_system_prompt out on the framework backend.")
    payload: dict[str, Any] = {
        "name": name, "model_mode": ap.FRAMEWORK_MODES[request.mode], "prompt": request.prompt_text(),
        "domain_name": request.embodiment, "action_chunk_size": request.num_frames - 1,
        "image_size": int(request.tier), "fps": int(request.fps), "num_steps": request.num_inference_steps,
        "guidance": request.guidance_scale, "shift": request.flow_shift, "seed": request.seed}
    if request.negative_prompt is not None:
        raise ValidationError("negative_prompt", "the framework's action batch has no negative caption (inference.py "
                              "get_sample_data: get_action_sample_data takes none), so it would be ignored.",
                              "leave negative_prompt out, or run the request on diffusers.")
    if request.guidance_interval is not None:  # read for every sample, actions too (inference.py:1709)
        payload["guidance_interval"] = list(fw.to_strict(request.guidance_interval))
    if request.view_point is not None:
        payload["view_point"] = request.view_point
    if request.video is not None:
        payload["vision_path"] = _media_path(request.video, request, folder, ".mp4")
    else:
        payload["vision_path"] = _media_path(request.image, request, folder, ".png")
    if request.actions is not None:
        target = folder / f"{request.fingerprint()}-actions.json"
        if not target.exists():
            save_trajectory(target, request.actions)
        payload["action_path"] = str(target)
    return payload


def _check_request(request: GenerationRequest) -> tuple[str, str] | None:
    """The request's framework bucket ``(tier, aspect)`` (``None``: an edit keeping its input's shape); refuses what
    the framework cannot run as asked."""
    bucket = (request.tier, request.aspect_ratio) if request.tier else bucket_of(request.width, request.height)
    if request.keeps_image_size:
        bucket = None
    elif bucket is None or bucket[0] not in fw.TIERS:
        what = f"tier {bucket[0]} (this project's CPU tier)" if bucket else f"{request.width}x{request.height}"
        raise ValidationError("tier" if bucket else "width", f"the framework generates its buckets only "
                              f"({', '.join(fw.TIERS)} x {', '.join(fw.ASPECT_RATIOS)}), not {what}.",
                              "use tier= and aspect_ratio= with a framework tier (e.g. tier='480'), or a profile "
                              "other than 'tiny'; or run on diffusers.")
    if not float(request.fps).is_integer():
        raise ValidationError("fps", f"the framework's fps is an integer, not {request.fps:g}.",
                              f"use fps={math.floor(request.fps)} or {math.ceil(request.fps)}.")
    if request.use_system_prompt is not None:
        raise ValidationError("use_system_prompt", "the framework's system prompt is a model-config setting "
                              "(Nano/Super/Edge: off), not a sample field.",
                              "leave use_system_prompt out on the framework backend, or run on diffusers/vLLM-Omni.")
    for name in ("add_resolution_template", "add_duration_template"):
        if getattr(request, name) is False:
            raise ValidationError(name, "the framework always appends its sentence templates to a plain-text prompt.",
                                  f"leave {name} out on the framework backend, or use a structured (JSON) caption.")
    return bucket


def _media_path(source: Any, request: GenerationRequest, folder: Path, suffix: str) -> str:
    """A conditioning input as a file the framework can read: its own path, or an array written once by content."""
    if isinstance(source, (str, os.PathLike)):
        return str(Path(source).expanduser().resolve())
    target = folder / f"{request.fingerprint()}{suffix}"
    if not target.exists():
        if suffix == ".png":
            media.write_png(target, np.asarray(request.conditioning_image()))
        else:
            media.write_mp4(target, request.conditioning_video(), request.fps)
    return str(target)


class _StepProgress:
    """Moves a bar by the run log's step counters (the last ``done/total`` of a line).

    One sample: the bar follows whatever counter the log shows. A batch (``steps``: each sample's step count, in
    order): the samples run one after another and each counts its own steps from the start, so the bar covers
    them all; a counter that goes back is the next sample's, and counters of another size (loading) are skipped.
    """

    def __init__(self, bar: Any, steps: Sequence[int] = ()) -> None:
        self.bar, self.steps = bar, list(steps)
        self.done_before = self.last = self.last_total = 0
        if bar is not None and len(self.steps) > 1:
            bar.total = sum(self.steps)

    def update(self, line: str) -> None:
        for done, total in _STEP_PATTERN.findall(line)[-1:] if self.bar is not None else ():
            done_i, total_i = int(done), int(total)
            if not (0 < total_i < 10000 and 0 <= done_i <= total_i):
                continue
            if len(self.steps) <= 1:
                if self.bar.total != total_i:
                    self.bar.total, self.bar.n = total_i, 0
                self.bar.n = done_i
            elif total_i in self.steps:
                if done_i < self.last:
                    self.done_before += self.last_total
                self.last, self.last_total = done_i, total_i
                self.bar.n = min(self.done_before + done_i, self.bar.total)
            else:
                continue
            self.bar.refresh()


__all__ = ["FrameworkBackend", "FrameworkRun", "INSTALL_HELP", "checkpoint_for", "request_payload"]
