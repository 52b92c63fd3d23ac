"""``FrameworkBackend``: Cosmos 3 through an NVIDIA/cosmos-framework checkout's inference CLI, one run folder per run;
a framework input file runs *unchanged* (overrides go on the command line). Without a checkout,
:meth:`FrameworkBackend.standin` runs the same contract on the tiny models."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

from .. import media
from ..errors import BackendUnavailableError, FrameworkRunError, ValidationError
from ..precision import describe as describe_precision
from ..precision import framework_flags, precision_record
from ..presets import SOUND_SAMPLE_RATE
from ..progress import progress_bar
from ..protocol import framework as fw
from ..request import GenerationRequest
from ..result import FinishedFile, Generation
from ..specs.load import Sample
from ..specs.resolve import ResolvedSample
from ..specs.runs import PlannedRun, SampleRun, check_portable
from ..standins.framework_cli import MODULE as STANDIN_MODULE
from ..protocol.step_cache import RESIDUAL_ORDERS
from ..step_cache import SeaCache, StepCache, check_for_backend, describe, step_cache_record
from .base import Backend, ProgressCallback
from .framework_run import (CACHE_FLAGS, INSTALL_HELP, TINY_MODELS, FrameworkRun, StepProgress, cache_flags,
                            check_request, checkpoint_for, collect, new_run_dir, predicted_actions, read_output,
                            request_payload, standin_record, stream)

NAME = "framework"
PYTHON_ENV = "COSMOS_FRAMEWORK_PYTHON"
MODULE_ENV = "COSMOS_FRAMEWORK_MODULE"


class FrameworkBackend(Backend):
    """Run framework input samples and :class:`GenerationRequest` s through ``cosmos_framework.scripts.inference``.

    Args:
        checkout: the NVIDIA/cosmos-framework checkout (the working directory of every run). gpus: GPUs per run
            (more than 1: ``torchrun``). parallelism_preset: ``latency``, ``throughput`` or ``None`` (the default's).
        python: interpreter that imports ``cosmos_framework`` (default: see :attr:`python`).
        extra_args: more CLI flags, e.g. ``("--sampler", "edm")``; not the diffusion cache's, which are the request's
            (``GenerationRequest(step_cache="off" | SeaCache(...))``; left out: the CLI's default, SeaCache on).
        work_dir: where run folders go (default ``<checkout>/outputs/cosmos_helpers``). module: the module to run
            (default ``cosmos_framework.scripts.inference`` or ``$COSMOS_FRAMEWORK_MODULE``). progress: a progress
            bar while the run streams its log. env: extra environment variables; timeout: seconds before a kill.

    The model, the guardrails and the step cache are the request's or the run's, as on every backend.
    """

    name = NAME
    as_written = True
    is_standin = False  # FrameworkBackend.standin() makes one that runs the package's stand-in

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
        cache_flag = next((a for a in map(str, extra_args) if a.split("=")[0] in CACHE_FLAGS), None)
        if cache_flag is not None:
            raise ValidationError("extra_args", f"{cache_flag} sets the framework's diffusion cache, which is each "
                                  "request's choice here (so the manifest can say what ran).",
                                  "drop it, and set GenerationRequest(..., step_cache='off' or SeaCache(...)) or "
                                  "run_spec(..., step_cache=...) (`cosmos-helpers run --step-cache`).")
        self.checkout: Path | None = Path(checkout).expanduser().resolve()
        self.gpus, self.parallelism_preset = gpus, parallelism_preset
        self._python = None if python is None else str(python)
        self.extra_args = tuple(str(a) for a in extra_args)
        self.work_dir = (Path(work_dir).expanduser().resolve() if work_dir
                         else self.checkout / "outputs" / "cosmos_helpers")
        self.module = module or os.environ.get(MODULE_ENV) or fw.MODULE
        self.progress, self.env, self.timeout = progress, dict(env or {}), timeout

    @classmethod
    def standin(cls, *, work_dir: str | os.PathLike[str] | None = None, gpus: int = 1,
                parallelism_preset: str | None = None, extra_args: Sequence[str] = (), progress: bool = True,
                env: dict[str, str] | None = None, timeout: float | None = None) -> "FrameworkBackend":
        """The framework CLI's stand-in, run with this Python from any folder; requests may name the tiny models."""
        backend = cls(Path.cwd(), gpus=gpus, parallelism_preset=parallelism_preset, python=sys.executable,
                      extra_args=extra_args, work_dir=work_dir or Path("outputs") / "cosmos_helpers",
                      module=STANDIN_MODULE, progress=progress, env=env, timeout=timeout)
        backend.checkout, backend.is_standin = None, True
        return backend

    def __repr__(self) -> str:
        if self.is_standin:
            return f"FrameworkBackend.standin(work_dir={str(self.work_dir)!r}, gpus={self.gpus})"
        return f"FrameworkBackend({str(self.checkout)!r}, gpus={self.gpus}, module={self.module!r})"

    @property
    def python(self) -> str:
        """The interpreter: ``python=``, ``$COSMOS_FRAMEWORK_PYTHON``, ``<checkout>/.venv/bin/python``, this Python."""
        if self._python or os.environ.get(PYTHON_ENV):
            return self._python or os.environ[PYTHON_ENV]
        venv = self.checkout / ".venv" / "bin" / "python"
        return str(venv) if venv.exists() else sys.executable

    def checkpoint_for(self, model: str) -> str:
        """The ``--checkpoint-path`` of ``model``; the stand-in also runs the tiny models, named as themselves."""
        return str(model) if self.is_standin and str(model) in TINY_MODELS else checkpoint_for(model)

    def launcher(self) -> list[str]:
        if self.gpus == 1:
            return [self.python, "-m", self.module]
        torchrun = Path(self.python).parent / "torchrun"
        head = [str(torchrun)] if torchrun.exists() else [self.python, "-m", "torch.distributed.run"]
        return [*head, "--nproc-per-node", str(self.gpus), "-m", self.module]

    def command(self, input_file: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, model: str,
                guardrails: bool, overrides: Mapping[str, Any] | None = None, flags: Sequence[str] = (),
                step_cache: StepCache = None) -> list[str]:
        """The exact command line of one run; ``overrides`` are sample fields given as the framework's own flags,
        ``flags`` the request's own (``--quantization-method``), ``step_cache`` None: the CLI's own default."""
        request_flags, flags = list(flags), fw.CLI_FLAGS
        tier = (overrides or {}).get("resolution")
        if tier is not None and str(tier) not in fw.TIERS:
            raise ValidationError("resolution", f"the framework knows the tiers {', '.join(fw.TIERS)}, not {tier!r}.",
                                  "override the resolution with a framework tier (128 is this project's CPU tier).")
        cmd = [*self.launcher(), flags["input"], str(input_file), flags["output"], str(out_dir),
               flags["checkpoint"], self.checkpoint_for(model)]
        for key, value in (overrides or {}).items():
            if value is not None:
                cmd += [flags[key], str(value)]
        if self.parallelism_preset:
            cmd += [flags["parallelism"], self.parallelism_preset]
        cmd.append(flags["guardrails"] if guardrails else flags["no_guardrails"])  # never the framework's default
        return cmd + request_flags + cache_flags(step_cache) + list(self.extra_args)

    def check_available(self) -> None:
        """Raise :class:`BackendUnavailableError` (with install steps) unless the checkout can run the module."""
        python = self.python
        if self.checkout is not None and not self.checkout.is_dir():
            raise self._unavailable("no such folder")
        if shutil.which(python) is None and not Path(python).exists():
            raise self._unavailable(f"interpreter {python} not found")
        probe = subprocess.run(
            [python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)",
             self.module], cwd=self._cwd(), env=self._env(), capture_output=True, text=True, timeout=120)
        if probe.returncode != 0:
            raise self._unavailable(f"{python} cannot import {self.module}")

    def _unavailable(self, reason: Any) -> BackendUnavailableError:
        if self.is_standin:
            return BackendUnavailableError(f"the framework stand-in cannot run ({reason}); it needs this package "
                                           "installed in the Python running it.")
        return BackendUnavailableError(INSTALL_HELP.format(where=f"{self.checkout} ({reason})", env=PYTHON_ENV))

    def _cwd(self) -> Path:
        """The checkout (the framework reads its files relative to it); for the stand-in, the work folder."""
        if self.checkout is not None:
            return self.checkout
        self.work_dir.mkdir(parents=True, exist_ok=True)
        return self.work_dir

    def _env(self) -> dict[str, str]:
        env = {**os.environ, **self.env}
        if self.checkout is not None:
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.checkout), env.get("PYTHONPATH", "")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def prepare(self, payload: Mapping[str, Any], *, name: str, model: str, guardrails: bool,
                overrides: Mapping[str, Any] | None = None, flags: Sequence[str] = (),
                step_cache: StepCache = None) -> FrameworkRun:
        """Write a run folder without launching; ``<name>.json`` is named after the sample, so a sample without
        ``name`` gets that name from the framework."""
        self.checkpoint_for(model)  # refuse a model the framework cannot run before anything is written
        self._check_cache(step_cache)
        return self._write(name, f"{name}.json", [payload], [name], model=model, guardrails=guardrails,
                           overrides=overrides, flags=flags, step_cache=step_cache)[0]

    def _write(self, label: str, input_name: str, payloads: Sequence[Mapping[str, Any]], names: Sequence[str], *,
               model: str, guardrails: bool, overrides: Mapping[str, Any] | None = None, flags: Sequence[str] = (),
               step_cache: StepCache = None) -> list[FrameworkRun]:
        """One run folder for ``payloads`` and its ``command.txt``: a ``.json`` input holds one sample as it is, a
        ``.jsonl`` one a sample per line (as ``common/args.py`` ``_from_file`` reads it)."""
        folder = new_run_dir(self.work_dir, label)
        input_file, out_dir = folder / input_name, folder / "out"
        command = self.command(input_file, out_dir, model=model, overrides=overrides, guardrails=guardrails,
                               flags=flags, step_cache=step_cache)
        text = json.dumps(dict(payloads[0]), indent=2, ensure_ascii=False) + "\n" if input_file.suffix == ".json" \
            else "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in payloads)
        media.write_bytes_atomic(input_file, text.encode())
        media.write_bytes_atomic(folder / "command.txt", (shlex.join(command) + "\n").encode())
        given = {k: v for k, v in (overrides or {}).items() if v is not None}
        return [FrameworkRun(folder=folder, input_file=input_file, out_dir=out_dir, name=n, command=tuple(command),
                             payload=dict(p), overrides=given, step_cache=step_cache) for n, p in zip(names, payloads)]

    def launch(self, run: FrameworkRun, *, expected_steps: int | None = None) -> Path:
        """Run a prepared folder; returns the framework's ``vision.mp4`` / ``vision.jpg``."""
        return self._launch([run], [expected_steps] if expected_steps else [], run.name)[0]

    def _launch(self, runs: Sequence[FrameworkRun], steps: Sequence[int], label: str) -> list[Path]:
        """One process for the runs of one folder: its log to ``run.log``, its step counters to a bar."""
        self.check_available()
        log_path = runs[0].folder / "run.log"
        bar = progress_bar(sum(steps) or None, f"framework {label}", "step", enabled=bool(self.progress))
        try:
            code, tail = stream(list(runs[0].command), cwd=self._cwd(), env=self._env(), log_path=log_path,
                                counter=StepProgress(bar, steps), timeout=self.timeout)
        except OSError as exc:
            raise self._unavailable(exc) from exc
        finally:
            bar.close()
        if code != 0:
            raise FrameworkRunError(f"the Cosmos Framework run exited with code {code} (full log: {log_path}). "
                                    "Log tail:\n" + "\n".join(tail))
        return [collect(run.sample_dir, run.out_dir, log_path) for run in runs]

    def _run(self, runs: Sequence[FrameworkRun], requests: Sequence[GenerationRequest], label: str) -> list[Generation]:
        started = time.perf_counter()
        paths = self._launch(runs, [r.num_inference_steps for r in requests], label)
        return [self._generation(run, path, started, workflow=r.mode, model=r.model, request=r)
                for run, path, r in zip(runs, paths, requests)]

    def check_sample(self, sample: Sample, r: ResolvedSample, given: set[str], step_cache: StepCache = None) -> None:
        check_portable(sample, r)
        self.checkpoint_for(r.model)
        self._check_cache(step_cache)

    def dry_run(self, run: SampleRun, *, pending: Collection[str] = ()) -> PlannedRun:
        """The run folder, written for a job submitted elsewhere."""
        if pending:
            raise ValidationError("compute_controls", "a framework dry run writes an input file for elsewhere, and the "
                                  "controls it names are not computed yet.", "run without dry_run, or compute them "
                                  "first (run_spec on any backend) and name them as control_path.")
        written = self.prepare_sample(run)
        return PlannedRun(run, folder=written.folder, input_file=written.input_file, command=written.command,
                          payload=written.payload)

    def prepare_sample(self, sample_run: SampleRun) -> FrameworkRun:
        r = sample_run.resolved
        return self.prepare(sample_run.sample.payload(), name=sample_run.sample.name, model=r.model,
                            guardrails=r.guardrails, overrides=sample_run.overrides, step_cache=sample_run.step_cache)

    def run_sample(self, run: SampleRun, *, progress: Any = True, server_paths: bool = False) -> Generation:
        r, written = run.resolved, self.prepare_sample(run)
        started = time.perf_counter()
        return self._generation(written, self.launch(written, expected_steps=r.num_steps), started,
                                workflow="transfer" if r.is_transfer else r.model_mode, model=r.model)

    def generate(self, request: GenerationRequest, *, progress: ProgressCallback | None = None,
                 name: str | None = None) -> Generation:
        """``progress`` hears once the run is done (its log moves this backend's bar)."""
        self.check(request := request.resolve())  # resolved once: what runs, is recorded and is returned
        name = name or f"{request.mode}_{request.fingerprint()[:8]}"
        flags = framework_flags(request.precision, request.model)
        payload = request_payload(request, name=name, image_dir=self.work_dir / "inputs")
        run = self.prepare(payload, name=name, model=request.model, guardrails=bool(request.guardrails),
                           flags=flags, step_cache=request.step_cache)
        (generation,) = self._run([run], [request], run.name)
        if progress is not None:
            progress(request.num_inference_steps, request.num_inference_steps)
        return generation

    def check(self, request: GenerationRequest) -> None:
        """Refuse, before anything is written, what the framework has no flag for or its sample cannot say."""
        request = request.resolve()
        self.checkpoint_for(request.model)
        self._check_cache(request.step_cache)
        framework_flags(request.precision, request.model)
        check_request(request)

    def _check_cache(self, step_cache: StepCache) -> None:
        """A setting the framework has no flag for; on the stand-in also one diffusers' hooks cannot run."""
        check_for_backend(step_cache, NAME)
        if self.is_standin and isinstance(step_cache, SeaCache) and step_cache.residual_order is not None and \
                step_cache.residual_order not in RESIDUAL_ORDERS["diffusers"]:
            raise ValidationError("step_cache.residual_order", f"the framework stand-in runs diffusers' SeaCache, "
                                  f"which has no residual order {step_cache.residual_order} (the real framework has).",
                                  "use residual_order=0 or 1 on the stand-in, or a framework checkout.")

    def generate_many(self, requests: Sequence[GenerationRequest], *,
                      names: Sequence[str] | None = None) -> list[Generation]:
        """Several requests in one framework run per ``step_cache`` (one ``.jsonl``, one process, one checkpoint load:
        minutes on a GPU host); they must share one checkpoint, guardrails setting and precision."""
        requests = [request.resolve() for request in requests]
        settings = {(r.model, bool(r.guardrails), json.dumps(precision_record(r.precision))) for r in requests}
        if len(settings) > 1:
            raise ValidationError("requests", f"one framework run loads one checkpoint with one guardrails setting "
                                  f"and one precision; these ask for {sorted(settings)} (model, guardrails, "
                                  "precision).", "group the requests by model, guardrails and precision, one "
                                  "generate_many call per group.")
        names = list(names) if names is not None else [f"{r.mode}_{r.fingerprint()[:8]}" for r in requests]
        if not requests or len(names) != len(requests) or len(set(names)) != len(names):
            raise ValidationError("names", f"{len(requests)} requests need as many distinct sample names, got "
                                  f"{names}.", "give one distinct name per request, or leave names out.")
        for request in requests:
            self.check(request)
        payloads = [request_payload(r, name=n, image_dir=self.work_dir / "inputs") for r, n in zip(requests, names)]
        groups: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            groups.setdefault(json.dumps(step_cache_record(request.step_cache), sort_keys=True), []).append(index)
        done: dict[int, Generation] = {}
        for indexes in groups.values():  # one run per step-cache setting: one command line each
            first = requests[indexes[0]]
            runs = self._write(f"batch_{len(indexes)}_{names[indexes[0]]}", "samples.jsonl",
                               [payloads[i] for i in indexes], [names[i] for i in indexes], model=first.model,
                               guardrails=bool(first.guardrails), flags=framework_flags(first.precision, first.model),
                               step_cache=first.step_cache)
            done.update(zip(indexes, self._run(runs, [requests[i] for i in indexes], f"{len(runs)} samples")))
        return [done[index] for index in range(len(requests))]

    def output_settings(self) -> dict[str, Any]:
        """The stand-in's program too: its output is never the framework's."""
        settings = {"extra_args": list(self.extra_args), "parallelism_preset": self.parallelism_preset}
        return {**settings, "standin": self.module} if self.is_standin else settings

    def _generation(self, run: FrameworkRun, path: Path, started: float, *, workflow: str, model: str,
                    request: GenerationRequest | None = None) -> Generation:
        frames, fps, sound, rate = read_output(path, float(run.payload.get("fps") or 24))
        controls = {p.stem.removeprefix("control_"): str(p) for p in sorted(path.parent.glob("control_*"))}
        standin = standin_record(path.parent) if self.is_standin else None
        cache = {**describe(run.step_cache, NAME), **((standin or {}).get("step_cache") or {})}
        precision = {} if request is None else {"precision": describe_precision(request.precision, self.name)}
        return Generation(actions=predicted_actions(path.parent), settings=self.output_settings(), request=request,
            frames=frames, fps=fps, seed=run.seed, sound=sound, standin=standin,
            sample_rate=rate or SOUND_SAMPLE_RATE, backend=self.name,
            model=str(standin["model_run"] if standin else model),
            timings={"total_s": time.perf_counter() - started}, finished=FinishedFile(path.suffix, path=path),
            provenance={"workflow": workflow, "payload": dict(run.payload), "output": str(path), "controls": controls,
                        "command": shlex.join(run.command), "run_folder": str(run.folder),
                        "checkout": str(self.checkout) if self.checkout else None, "step_cache": cache, **precision})


__all__ = ["FrameworkBackend", "FrameworkRun", "INSTALL_HELP", "checkpoint_for", "request_payload"]
