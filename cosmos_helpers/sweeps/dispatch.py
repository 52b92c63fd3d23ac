"""``sweep(notebook, grid)``: every check before the first run, then the runs in parallel over slots.

A slot (a vLLM-Omni server, a GPU, or a local process) runs one run at a time: in a ``cosmos_helpers.sweeps.worker``
process each, in a thread here when it is the only one, or as a Ray actor. The run manifest records the slot.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import ValidationError
from ..progress import progress_bar
from .grid import load_grid, run_names, validate_sets
from .report import SweepResult, write_reports
from .runs import SweepRun, code_digest, holding, in_flight, now, plan, this_process
from .worker import RayWorker, ray_slot_count, run_task

LOG_DIR = ".workers"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding this cosmos_helpers


@dataclass(frozen=True)
class Slot:
    index: int
    server_url: str | None = None
    gpu: str | None = None
    ray: str | None = None  # "gpu" or "cpu": a Ray actor of the cluster

    def describe(self) -> dict[str, Any]:
        return {"slot": self.index, **{k: v for k, v in asdict(self).items() if k != "index" and v is not None}}

    def label(self) -> str:
        if self.server_url is not None:
            return self.server_url
        if self.ray is not None:
            return f"ray worker {self.index} ({self.ray})"
        return f"gpu {self.gpu}" if self.gpu is not None else f"worker {self.index}"


def _listed(value: str | Sequence[Any] | None, field: str) -> list[str]:
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else [str(item) for item in value]
    items = [item.strip() for item in items]
    if not items or any(not item for item in items):
        raise ValidationError(field, f"{value!r} has an empty entry.",
                              f"give a comma-separated list, e.g. {field}=0,1.")
    return items


def make_slots(*, servers: str | Sequence[str] | None = None, gpus: str | Sequence[Any] | None = None,
               jobs: int | None = None, ray: Any = None) -> list[Slot]:
    """One slot per server URL, per GPU, or ``jobs`` local slots (default 1); or, with ``ray`` (an address, or True
    for a local instance), one per GPU of the Ray cluster (``jobs`` on CPUs)."""
    server_list, gpu_list = _listed(servers, "servers"), _listed(gpus, "gpus")
    if ray:
        if server_list or gpu_list:
            raise ValidationError("ray", "was given with servers/gpus; Ray places each run on its cluster's GPUs.",
                                  "drop servers/gpus with ray (or drop ray).")
        count, on_gpus = ray_slot_count(ray, jobs)
        return [Slot(index, ray="gpu" if on_gpus else "cpu") for index in range(count)]
    if server_list and gpu_list:
        raise ValidationError("servers/gpus", "both were given; a worker is either a server or a GPU.",
                              "pass servers= (vLLM-Omni URLs) or gpus= (device indices), not both.")
    if jobs is not None and (server_list or gpu_list):
        raise ValidationError("jobs", "was given with servers/gpus, which already set one worker each.",
                              "drop jobs (list a server URL twice for two runs in flight at one server).")
    if jobs is not None and (not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1):
        raise ValidationError("jobs", f"{jobs!r} is not a positive integer.", "pass jobs=1 or more.")
    for url in server_list:
        if not url.startswith(("http://", "https://")):
            raise ValidationError("servers", f"{url!r} is not an http(s) URL.", "give e.g. http://gpu-host:8000.")
    for gpu in gpu_list:
        if not gpu.isdigit() and not gpu.startswith(("GPU-", "MIG-")):
            raise ValidationError("gpus", f"{gpu!r} is not a device index or UUID.", "give e.g. gpus=0,1.")
    if server_list:
        return [Slot(index, server_url=url.rstrip("/")) for index, url in enumerate(server_list)]
    if gpu_list:
        return [Slot(index, gpu=gpu) for index, gpu in enumerate(gpu_list)]
    return [Slot(index) for index in range(jobs or 1)]


@dataclass
class Dispatch:
    """What every run of one sweep shares: how to inject, which kernel, whether to stream the output."""

    server_parameter: str | None = None
    output_parameter: str | None = None
    kernel: str = "python3"
    log_output: bool = False

    def injected(self, run: SweepRun, slot: Slot) -> dict[str, Any]:
        values = dict(run.parameters)
        if self.output_parameter:
            values[self.output_parameter] = str(run.outputs)
        if slot.server_url is not None and self.server_parameter:
            values[self.server_parameter] = slot.server_url
        return values

    def environment(self, slot: Slot) -> dict[str, str]:
        """A run's (and its kernel's) variables on top of ours: static previews, this package first, the slot's GPU."""
        path = os.environ.get("PYTHONPATH")
        env = {"COSMOS_HELPERS_STATIC": "1", "PYTHONPATH": _PACKAGE_ROOT + (os.pathsep + path if path else "")}
        if slot.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = slot.gpu
        return env

    def execute(self, run: SweepRun, slot: Slot, worker: "Worker | InProcessWorker") -> None:
        run.folder.mkdir(parents=True, exist_ok=True)
        run.status, run.started, run.worker, run.error, run.seconds = "running", now(), slot.describe(), None, None
        run.owner = this_process()
        with in_flight(run.folder):  # until it ends, even after a Ctrl-C this thread cannot stop (see .runs)
            run.write_manifest()
            outcome = worker.run({"notebook": run.notebook, "executed": str(run.executed),
                                  "parameters": self.injected(run, slot), "kernel": self.kernel,
                                  "log_output": self.log_output})
        run.seconds, run.error = outcome["seconds"], outcome["error"]
        run.status, run.finished = ("ok" if run.error is None else "failed"), now()
        run.write_manifest()


class InProcessWorker:
    """The only slot of a sweep runs here, one run after another, with the slot's environment set around each run:
    with nothing in parallel, papermill's working-directory change and the environment are safe to share, and
    a worker process (papermill imported again) would only add start-up time."""

    def __init__(self, slot: Slot, dispatch: Dispatch) -> None:
        self.slot, self.dispatch = slot, dispatch

    def run(self, task: dict[str, Any]) -> dict[str, Any]:
        from unittest.mock import patch

        with patch.dict(os.environ, self.dispatch.environment(self.slot)):  # restored afterwards, as it was
            return run_task(task)

    def close(self, *, kill: bool = False) -> None:
        pass


class Worker:
    """One slot's ``cosmos_helpers.sweeps.worker`` process, started on first use and restarted if it dies."""

    def __init__(self, slot: Slot, dispatch: Dispatch, log_dir: Path) -> None:
        self.slot, self.dispatch = slot, dispatch
        self.log_path = log_dir / f"worker-{slot.index}.log"
        self.process: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        if self.process is None or self.process.poll() is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.nullcontext() if self.dispatch.log_output else open(self.log_path, "a") as log:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "cosmos_helpers.sweeps.worker"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=log, env={**os.environ, **self.dispatch.environment(self.slot)},
                    text=True)
        return self.process

    def run(self, task: dict[str, Any]) -> dict[str, Any]:
        process = self._start()
        try:
            print(json.dumps(task), file=process.stdin, flush=True)
            answer = process.stdout.readline()
        except (BrokenPipeError, OSError):
            answer = ""
        if answer:
            return json.loads(answer)
        code = process.wait()
        tail = self.log_path.read_text(errors="replace").strip().splitlines()[-8:] if self.log_path.is_file() else []
        return {"seconds": None, "error": f"worker process exited with code {code}: " + "\n".join(tail)}

    def close(self, *, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.terminate()
        else:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _workers(runs: list[SweepRun], slots: list[Slot], dispatch: Dispatch, log_dir: Path) -> list:
    """One worker per slot that has a run: Ray actors, this process (a single slot) or worker processes."""
    used = slots[:max(1, len(runs))]
    if used[0].ray is not None:
        return [RayWorker(s, dispatch) for s in used]
    if len(used) == 1:
        return [InProcessWorker(used[0], dispatch)]
    return [Worker(s, dispatch, log_dir) for s in used]


def run_all(runs: list[SweepRun], slots: list[Slot], dispatch: Dispatch, *, total: int, log_dir: Path) -> None:
    """Execute ``runs`` over ``slots``, one run at a time each; ``total`` (every run of the sweep) sizes the progress
    bar. On Ctrl-C the workers stop; runs in flight stay ``running`` in their manifests, which a rerun repeats."""
    pending = collections.deque(runs)  # popleft is thread-safe
    workers = _workers(runs, slots, dispatch, log_dir)
    stop, lock = threading.Event(), threading.Lock()

    def work(worker: Worker | InProcessWorker) -> None:
        while not stop.is_set():
            try:
                run = pending.popleft()
            except IndexError:
                return
            print(f"start {run.name} on {worker.slot.label()}", flush=True)
            try:
                dispatch.execute(run, worker.slot, worker)
            except Exception as exc:  # e.g. a full disk: this run failed, the others go on
                run.status, run.error, run.finished = "failed", f"{type(exc).__name__}: {exc}", now()
                with contextlib.suppress(OSError):
                    run.write_manifest()
            with lock:
                if stop.is_set():
                    return
                print(f"{'ok' if run.ok else 'FAILED'} {run.name} in {run.seconds or 0:.1f} s", flush=True)
                bar.update(1)
                bar.set_postfix_str(f"{run.name} {run.status}")

    threads = [threading.Thread(target=work, args=(worker,), daemon=True) for worker in workers]
    with progress_bar(total=total, desc="sweep", unit="run") as bar:
        if total > len(runs):
            bar.update(total - len(runs))
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
        except KeyboardInterrupt:
            stop.set()
            for worker in workers:
                worker.close(kill=True)
            raise
        finally:
            for worker in workers:
                worker.close()


def sweep(notebook: str | Path, grid: Any, *, out: str | Path | None = None,
          servers: str | Sequence[str] | None = None, gpus: str | Sequence[Any] | None = None,
          jobs: int | None = None, ray: Any = None, parameters: Mapping[str, Any] | None = None,
          server_parameter: str = "server_url", output_parameter: str | None = "output_dir",
          kernel: str = "python3", log_output: bool = False, write_report: bool = True) -> SweepResult:
    """Run ``notebook`` once per parameter set of ``grid`` with papermill, each run in its own folder.

    Args:
        grid: a YAML/CSV path, a mapping ``{name: [values]}`` (every combination) or a list of sets.
        out: the sweep's folder (default ``outputs/sweeps/<notebook name>``); one sub-folder per run, named from
            its parameters, and the report files.
        servers: vLLM-Omni URLs, one worker each; each run gets its worker's URL in ``server_parameter``.
        gpus: device indices, one worker each; each run's kernel sees only its worker's GPU.
        jobs: local workers when neither is given (default 1); with ``ray`` on a cluster without GPUs, its workers.
        ray: a Ray address (``"auto"``, ``"ray://head:10001"``) or ``True`` for a local instance: each run is a Ray
            task on an actor per GPU of the cluster (the notebook and ``out`` on a filesystem every node sees).
        parameters: fixed values for every run (e.g. ``{"profile": "nano"}``); part of each run's identity.
        output_parameter: the notebook parameter that receives the run's output folder; ``None`` to run a
            notebook without one (its outputs then go wherever it writes them, and the gallery is empty).
        write_report: write ``summary.csv``, ``contact_sheet.png``, ``times.png`` and ``sweep.html`` in ``out``.

    A rerun skips finished runs, repeats failed or interrupted ones, and refuses a folder holding other
    parameters. Failures are recorded, not raised: see :attr:`SweepResult.failed`.
    """
    notebook = Path(notebook).resolve()
    sets = load_grid(grid)
    slots = make_slots(servers=servers, gpus=gpus, jobs=jobs, ray=ray)
    fixed = dict(parameters or {})
    served = any(slot.server_url for slot in slots)
    _validate(notebook, sets, fixed, served, server_parameter, output_parameter)
    out = (Path(out) if out is not None else Path("outputs", "sweeps", notebook.stem)).resolve()
    code = code_digest(notebook)
    runs = [SweepRun(name, {**fixed, **values}, out / name, notebook=str(notebook), code=code)
            for name, values in zip(run_names(sets), sets)]
    with holding(out):
        todo = plan(runs)
        if len(todo) < len(runs):
            print(f"{len(runs) - len(todo)} of {len(runs)} runs already finished in {out}; running {len(todo)}",
                  flush=True)
        dispatch = Dispatch(server_parameter=server_parameter if served else None,
                            output_parameter=output_parameter, kernel=kernel, log_output=log_output)
        run_all(todo, slots, dispatch, total=len(runs), log_dir=out / LOG_DIR)
        result = SweepResult(notebook, out, runs)
        if write_report:
            result.files = write_reports(result)
    return result


def _validate(notebook: Path, sets: list[dict[str, Any]], fixed: dict[str, Any], served: bool,
              server_parameter: str, output_parameter: str | None) -> None:
    """The grid's and the fixed parameters' names and types, and the names the sweep sets itself, on ``notebook``."""
    reserved = {output_parameter: "each run's own output folder"} if output_parameter else {}
    if served:
        reserved[server_parameter] = "each worker's server URL"
    accepted = validate_sets(notebook, sets, reserved=reserved)
    validate_sets(notebook, [fixed], reserved=reserved, what="fixed parameter")
    valid = ", ".join(accepted)
    if served and server_parameter not in accepted:
        raise ValidationError("servers", f"{notebook.name} has no {server_parameter!r} parameter to receive a "
                              f"server URL (its parameters: {valid}).",
                              "add one to its parameters cell, or name it with server_parameter= "
                              "(--server-parameter).")
    if output_parameter and output_parameter not in accepted:
        raise ValidationError("output_parameter", f"{notebook.name} has no {output_parameter!r} parameter, so "
                              f"every run would write to the same place (its parameters: {valid}).",
                              "add output_dir to its parameters cell, name another with output_parameter=, or "
                              "pass output_parameter=None (--no-output-parameter) to run it anyway.")
    both = sorted({name for values in sets for name in values} & set(fixed))
    if both:
        raise ValidationError(f"grid parameter {both[0]!r}", "is also given as a fixed parameter.",
                              "set it in the grid or in parameters, not both.")
