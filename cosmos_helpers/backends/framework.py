"""``FrameworkBackend``: run Cosmos 3 through an NVIDIA/cosmos-framework checkout's inference CLI.

For users on a GPU host with the framework installed. Each call writes the input (a transfer spec, an
``audio_image2video`` spec, or the audiovisual payload of a :class:`~cosmos_helpers.GenerationRequest`) into a
fresh run folder, launches::

    python -m cosmos_framework.scripts.inference -i <run>/spec.json -o <run>/out \\
        --checkpoint-path Cosmos3-Nano --seed N --parallelism-preset latency [--no-guardrails]

(``torchrun --nproc-per-node G -m ...`` for ``gpus > 1``) in the checkout, streams the log with a progress bar
(step counters such as ``12/35`` are parsed when the framework prints them), and reads back
``<run>/out/<name>/vision.mp4``. A failed run raises :class:`~cosmos_helpers.errors.FrameworkRunError` with the
log tail; a missing checkout or interpreter raises :class:`~cosmos_helpers.errors.BackendUnavailableError`
saying how to install the framework.

The interpreter is ``python=``, else ``$COSMOS_FRAMEWORK_PYTHON``, else the checkout's ``.venv/bin/python``
(what ``uv sync`` creates), else this Python. ``module=`` / ``$COSMOS_FRAMEWORK_MODULE`` replace the module
name; tests use that to point the backend at a stand-in program with the same command-line contract.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from ..errors import BackendUnavailableError, FrameworkRunError, ValidationError
from ..result import Generation

FRAMEWORK_MODULE = "cosmos_framework.scripts.inference"
PYTHON_ENV = "COSMOS_FRAMEWORK_PYTHON"
MODULE_ENV = "COSMOS_FRAMEWORK_MODULE"
CHECKPOINTS = ("Cosmos3-Nano", "Cosmos3-Super")
PRESETS = ("latency", "throughput")
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


class FrameworkBackend:
    """Run specs and requests through ``cosmos_framework.scripts.inference``.

    Args:
        checkout: the NVIDIA/cosmos-framework checkout (the working directory of every run).
        checkpoint: ``--checkpoint-path`` (``Cosmos3-Nano``, ``Cosmos3-Super`` or a local path).
        gpus: GPUs per run; more than 1 launches ``torchrun --nproc-per-node gpus``.
        parallelism_preset: ``latency`` (CFG/context parallel) or ``throughput`` (data parallel).
        python: interpreter that imports ``cosmos_framework`` (default: see the module docstring).
        guardrails: ``False`` adds ``--no-guardrails``.
        extra_args: more CLI flags, e.g. ``("--no-diffusion-cache",)`` for the exact sampler.
        work_dir: where run folders go (default ``<checkout>/outputs/cosmos_helpers``).
        module: the module to run (default ``cosmos_framework.scripts.inference`` or ``$COSMOS_FRAMEWORK_MODULE``).
        progress: show a progress bar while the run streams its log.
        env: extra environment variables for the run.
    """

    name = "framework"

    def __init__(
        self,
        checkout: str | os.PathLike[str],
        *,
        checkpoint: str = "Cosmos3-Nano",
        gpus: int = 1,
        parallelism_preset: str = "latency",
        python: str | os.PathLike[str] | None = None,
        guardrails: bool = True,
        extra_args: Sequence[str] = (),
        work_dir: str | os.PathLike[str] | None = None,
        module: str | None = None,
        progress: bool = True,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        if not isinstance(gpus, int) or gpus < 1:
            raise ValidationError("gpus", f"must be a positive integer, got {gpus!r}.", "use 1, 2, 4 or 8.")
        if parallelism_preset not in PRESETS:
            raise ValidationError("parallelism_preset", f"unknown preset {parallelism_preset!r}.",
                                  f"use one of {', '.join(PRESETS)}.")
        self.checkout = Path(checkout).expanduser().resolve()
        self.checkpoint = str(checkpoint)
        self.gpus = gpus
        self.parallelism_preset = parallelism_preset
        self._python = None if python is None else str(python)
        self.guardrails = bool(guardrails)
        self.extra_args = tuple(str(a) for a in extra_args)
        self.work_dir = Path(work_dir).expanduser().resolve() if work_dir else self.checkout / "outputs" / "cosmos_helpers"
        self.module = module or os.environ.get(MODULE_ENV) or FRAMEWORK_MODULE
        self.progress = progress
        self.env = dict(env or {})
        self.timeout = timeout

    def __repr__(self) -> str:
        return (f"FrameworkBackend({str(self.checkout)!r}, checkpoint={self.checkpoint!r}, gpus={self.gpus}, "
                f"parallelism_preset={self.parallelism_preset!r})")

    # ------------------------------------------------------------------------------------------ launcher

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

    def command(self, spec_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], seed: int | None) -> list[str]:
        """The exact command line of one run."""
        cmd = [*self.launcher(), "--parallelism-preset", self.parallelism_preset, "-i", str(spec_path),
               "-o", str(out_dir), "--checkpoint-path", self.checkpoint]
        if seed is not None:
            cmd += ["--seed", str(int(seed))]
        if not self.guardrails:
            cmd.append("--no-guardrails")
        return cmd + list(self.extra_args)

    def check_available(self) -> None:
        """Raise :class:`BackendUnavailableError` (with install steps) unless the checkout can run the module."""
        where = str(self.checkout)
        if not self.checkout.is_dir():
            raise BackendUnavailableError(INSTALL_HELP.format(where=f"{where} (no such folder)", env=PYTHON_ENV))
        python = self.python
        if shutil.which(python) is None and not Path(python).exists():
            raise BackendUnavailableError(INSTALL_HELP.format(where=f"{where} (interpreter {python} not found)",
                                                              env=PYTHON_ENV))
        probe = subprocess.run(
            [python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)",
             self.module], cwd=self.checkout, env=self._env(), capture_output=True, text=True, timeout=120)
        if probe.returncode != 0:
            raise BackendUnavailableError(INSTALL_HELP.format(
                where=f"{where} ({python} cannot import {self.module})", env=PYTHON_ENV))

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.checkout), env.get("PYTHONPATH", "")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    # ------------------------------------------------------------------------------------------ runs

    def run_payload(self, payload: dict[str, Any], *, seed: int | None = None, name: str | None = None,
                    expected_steps: int | None = None) -> Path:
        """Write ``payload`` (one spec object) into a new run folder, run it, return ``<out>/<name>/vision.mp4``."""
        self.check_available()
        name = str(name or payload.get("name") or "run")
        payload = {**payload, "name": name}
        run_dir = self._new_run_dir(name)
        spec_path = run_dir / "spec.json"
        spec_path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        out_dir = run_dir / "out"
        cmd = self.command(spec_path, out_dir, seed if seed is not None else payload.get("seed"))
        (run_dir / "command.txt").write_text(" ".join(_quote(c) for c in cmd) + "\n", encoding="utf-8")
        self._launch(cmd, run_dir / "run.log", expected_steps or payload.get("num_steps"), name)
        return self._collect(out_dir, name, run_dir / "run.log")

    def transfer(self, spec: Any, *, name: str | None = None, seed: int | None = None) -> Generation:
        """Run a transfer (or ``audio_image2video``) :class:`~cosmos_helpers.transfer.TransferSpec` or spec file."""
        from ..transfer.spec import TransferSpec, load_spec

        if not isinstance(spec, TransferSpec):
            spec = load_spec(spec)
        spec.validate()
        payload = spec_payload(spec)
        if seed is not None:
            payload["seed"] = int(seed)
        started = time.perf_counter()
        video = self.run_payload(payload, seed=payload.get("seed"), name=name or spec.name or "transfer")
        return self._generation(video, payload, started, workflow="transfer" if spec.hints else payload.get(
            "model_mode", "video2video"))

    def generate(self, request: Any, *, name: str | None = None) -> Generation:
        """Run a :class:`~cosmos_helpers.GenerationRequest` (t2i / t2v / i2v, with or without sound)."""
        payload = request_payload(request, name=name)
        started = time.perf_counter()
        video = self.run_payload(payload, seed=request.seed, name=payload["name"])
        generation = self._generation(video, payload, started, workflow=payload["model_mode"])
        generation.request = request
        return generation

    # ------------------------------------------------------------------------------------------ internals

    def _new_run_dir(self, name: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60] or "run"
        self.work_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for index in range(1000):
            run_dir = self.work_dir / (f"{stamp}-{safe}" + ("" if index == 0 else f"-{index}"))
            try:
                run_dir.mkdir()
                return run_dir
            except FileExistsError:
                continue
        raise FrameworkRunError(f"could not create a run folder under {self.work_dir}")

    def _launch(self, cmd: list[str], log_path: Path, expected_steps: Any, name: str) -> None:
        from ..progress import progress_bar

        bar = progress_bar(int(expected_steps) if expected_steps else None, f"framework {name}", "step",
                           enabled=bool(self.progress))
        tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
        try:
            process = subprocess.Popen(cmd, cwd=self.checkout, env=self._env(), stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, bufsize=1, errors="replace")
        except OSError as exc:
            raise BackendUnavailableError(INSTALL_HELP.format(where=f"{self.checkout} ({exc})", env=PYTHON_ENV)) from exc
        timer = None
        if self.timeout:
            timer = threading.Timer(self.timeout, process.kill)
            timer.start()
        try:
            with open(log_path, "w", encoding="utf-8") as log:
                assert process.stdout is not None
                for line in process.stdout:
                    log.write(line)
                    log.flush()
                    tail.append(line.rstrip("\n"))
                    if bar is not None:
                        _update_bar(bar, line)
            code = process.wait()
        finally:
            if timer is not None:
                timer.cancel()
            if bar is not None:
                bar.close()
        if code != 0:
            text = "\n".join(tail)
            raise FrameworkRunError(f"the Cosmos Framework run exited with code {code} (full log: {log_path}). "
                                    f"Log tail:\n{text}")

    def _collect(self, out_dir: Path, name: str, log_path: Path) -> Path:
        video = out_dir / name / "vision.mp4"
        if video.is_file():
            return video
        found = sorted(p for p in out_dir.rglob("*.mp4") if not p.name.startswith("control_"))
        if found:
            return found[0]
        images = sorted(out_dir.rglob("*.png")) + sorted(out_dir.rglob("*.jpg"))
        if images:
            return images[0]
        raise FrameworkRunError(f"the run finished but wrote no {video} (full log: {log_path}).")

    def _generation(self, path: Path, payload: dict[str, Any], started: float, workflow: str) -> Generation:
        from .. import media

        if path.suffix == ".mp4":
            video = media.read_video(path, with_audio=True)
            frames, fps, sound = video.frames, float(video.fps or payload.get("fps") or 24), video.sound
        else:
            frames, fps, sound = media.read_png(path)[None], float(payload.get("fps") or 24), None
        controls = {}
        for control in sorted(path.parent.glob("control_*.mp4")):
            controls[control.stem.removeprefix("control_")] = control
        return Generation(
            frames=frames, fps=fps, seed=int(payload.get("seed") or 0), sound=sound, backend=self.name,
            model=self.checkpoint, timings={"total_s": time.perf_counter() - started},
            provenance={"workflow": workflow, "payload": payload, "output": str(path),
                        "controls": {k: str(v) for k, v in controls.items()},
                        "command": " ".join(self.command("SPEC", "OUT", payload.get("seed"))),
                        "checkout": str(self.checkout)},
        )


def spec_payload(spec: Any) -> dict[str, Any]:
    """The spec as the user wrote it, with every file path made absolute (the run folder is elsewhere)."""
    from ..transfer.spec import HINT_KINDS, PATH_FIELDS

    data = spec.to_dict()
    base = Path(spec.base_dir)

    def absolute(value: Any) -> Any:
        if not isinstance(value, str) or "://" in value:
            return value
        path = Path(value).expanduser()
        if path.is_absolute():
            return str(path)
        candidate = (base / path).resolve()
        # a bare negative_prompt_file name may refer to the framework's own defaults/ folder
        return str(candidate) if candidate.exists() or path.parent != Path(".") else value

    for key in PATH_FIELDS:
        if key in data:
            data[key] = absolute(data[key])
    for kind in HINT_KINDS:
        if isinstance(data.get(kind), dict) and "control_path" in data[kind]:
            data[kind] = {**data[kind], "control_path": absolute(data[kind]["control_path"])}
    return data


def request_payload(request: Any, *, name: str | None = None, image_dir: str | os.PathLike[str] | None = None
                    ) -> dict[str, Any]:
    """The framework's audiovisual payload (cookbook reference §5.3) of a ``GenerationRequest``."""
    if request.mode == "video2video":
        raise ValidationError("mode", "video2video is not part of the framework's audiovisual payload.",
                              "use text2image, text2video or image2video with the framework backend.")
    payload: dict[str, Any] = {
        "model_mode": request.mode,
        "name": name or f"{request.mode}_{request.fingerprint()[:8]}",
        "prompt": _caption_text(request.caption),
        "negative_prompt": _caption_text(request.negative_caption),
        "enable_sound": bool(request.sound),
        "num_steps": request.num_inference_steps,
        "guidance": request.guidance_scale,
        "shift": request.flow_shift,
        "fps": int(round(request.fps)),
        "num_frames": request.num_frames,
        "seed": request.seed,
    }
    if request.tier is not None and request.tier in ("256", "480", "720", "768"):
        payload["resolution"] = request.tier
        payload["aspect_ratio"] = request.aspect_ratio
    else:
        payload["resolution"] = "256" if request.tier == "128" else "720"
        payload["aspect_ratio"] = request.aspect_ratio
    if request.mode == "image2video":
        image = request.image
        if isinstance(image, (str, os.PathLike)):
            payload["vision_path"] = str(Path(image).expanduser().resolve())
        else:
            from .. import media

            folder = Path(image_dir) if image_dir else Path(os.environ.get("TMPDIR", "/tmp")) / "cosmos_helpers_inputs"
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / f"{request.fingerprint()}.png"
            if not target.exists():
                import numpy as np

                media.write_png(target, np.asarray(request.conditioning_image()), overwrite=True)
            payload["vision_path"] = str(target)
    return payload


def _caption_text(caption: Any) -> str:
    if isinstance(caption, dict):
        return json.dumps(caption, separators=(",", ":"), ensure_ascii=False)
    return str(caption or "")


def _update_bar(bar: Any, line: str) -> None:
    matches = _STEP_PATTERN.findall(line)
    for done, total in matches[-1:]:
        done_i, total_i = int(done), int(total)
        if 0 < total_i < 10000 and 0 <= done_i <= total_i:
            if bar.total != total_i:
                bar.total = total_i
                bar.n = 0
            bar.n = done_i
            bar.refresh()


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


__all__ = ["FrameworkBackend", "INSTALL_HELP", "request_payload", "spec_payload"]
