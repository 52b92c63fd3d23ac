"""One framework run: the sample a :class:`~cosmos_helpers.request.GenerationRequest` becomes (``FrameworkBackend``'s
wire format), its folder (:class:`FrameworkRun`), the run as a process and its outputs."""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .. import media
from ..errors import FrameworkRunError, ValidationError
from ..models.tiny_distilled import MODEL_NAME as TINY_DISTILLED
from ..models.tiny_edge import MODEL_NAME as TINY_EDGE
from ..presets import bucket_of
from ..protocol import action as ap
from ..protocol import framework as fw
from ..protocol import step_cache as cache_facts
from ..request import GenerationRequest
from ..standins import STANDIN_FILE
from ..step_cache import OFF, SeaCache, StepCache
from ..trajectories import save_trajectory

TINY_MODELS = ("tiny", TINY_DISTILLED, TINY_EDGE)  # this project's embedded models: the framework stand-in's only
# Every flag of the framework's diffusion cache (none of them may come from anywhere but the request).
CACHE_FLAGS = frozenset({cache_facts.FRAMEWORK_ON_FLAG, cache_facts.FRAMEWORK_OFF_FLAG,
                         *(names[2] for names in cache_facts.FIELDS.values() if names[2])})
LOG_TAIL_LINES = 40
INSTALL_HELP = (
    "The Cosmos Framework is not usable at {where}. It runs on a Linux host with NVIDIA GPUs: "
    "`git clone https://github.com/NVIDIA/cosmos-framework.git`, then inside the checkout "
    "`GIT_LFS_SKIP_SMUDGE=1 uv sync --all-extras --group=cu128-train` (cu130-train on aarch64), and "
    "`hf auth login` with access to the Cosmos3 checkpoints. Then use FrameworkBackend('/path/to/cosmos-framework') "
    "(it runs the checkout's .venv/bin/python), or set {env} to the interpreter that imports cosmos_framework. "
    "Without a GPU host, use DiffusersBackend or VllmOmniBackend instead."
)

_STEP_PATTERN = re.compile(r"(?<![\d.])(\d{1,5})\s*/\s*(\d{1,5})(?![\d.])")


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
    step_cache: StepCache = None  # the run's --[no-]diffusion-cache choice (None: the CLI's default)

    @property
    def seed(self) -> int:
        """The seed the framework uses: ``--seed``, the sample's, else its fallback from name and output folder."""
        seed = next((v for v in (self.overrides.get("seed"), self.payload.get("seed")) if v is not None), None)
        return fw.fallback_seed(self.name, self.sample_dir.absolute()) if seed is None else int(seed)

    @property
    def sample_dir(self) -> Path:
        """``<out>/<name>``: the framework's folder for the sample (``vision.mp4`` / ``vision.jpg``, controls)."""
        return self.out_dir / self.name


class StepProgress:
    """Moves a bar by the run log's step counters (the last ``done/total`` of a line). In a batch (``steps``: each
    sample's step count; the bar's total, their sum) each sample counts from the start: a counter that goes back is
    the next sample's, and counters of another size (loading) are skipped."""

    def __init__(self, bar: Any, steps: Sequence[int] = ()) -> None:
        self.bar, self.steps = bar, list(steps)
        self.done_before = self.last = self.last_total = 0

    def update(self, line: str) -> None:
        for done, total in _STEP_PATTERN.findall(line)[-1:]:
            done_i, total_i = int(done), int(total)
            if not (0 < total_i < 10000 and 0 <= done_i <= total_i):
                continue
            if len(self.steps) <= 1:
                self.bar.total, self.bar.n = total_i, done_i
            elif total_i in self.steps:
                if done_i < self.last:
                    self.done_before += self.last_total
                self.last, self.last_total = done_i, total_i
                self.bar.n = min(self.done_before + done_i, self.bar.total)
            else:
                continue
            self.bar.refresh()


def stream(cmd: list[str], *, cwd: Path, env: Mapping[str, str], log_path: Path, counter: StepProgress,
           timeout: float | None) -> tuple[int, list[str]]:
    """Run ``cmd``, writing its log as it comes and feeding each line to ``counter``; ``(exit code, log tail)``."""
    tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
    process = subprocess.Popen(cmd, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, bufsize=1, errors="replace")
    timer = threading.Timer(timeout or 0, process.kill)
    if timeout:
        timer.start()
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                log.flush()
                tail.append(line.rstrip("\n"))
                counter.update(line)
        return process.wait(), list(tail)
    finally:
        timer.cancel()


def new_run_dir(work_dir: Path, name: str) -> Path:
    """A fresh ``<work_dir>/<stamp>-<name>`` folder (``-1``, ``-2``... when several start in the same second)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60] or "run"
    work_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for index in range(1000):
        run_dir = work_dir / (f"{stamp}-{safe}" + (f"-{index}" if index else ""))
        with contextlib.suppress(FileExistsError):
            run_dir.mkdir()
            return run_dir
    raise FrameworkRunError(f"could not create a run folder under {work_dir}")


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


def collect(sample_dir: Path, out_dir: Path, log_path: Path) -> Path:
    """The framework's output by its layout: ``<out>/<name>/vision.mp4`` or ``vision.jpg`` (args.py:437)."""
    for frames in (2, 1):
        path = sample_dir / fw.vision_file(frames)
        if path.is_file():
            return path
    found = sorted(p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file())  # none if no dir
    raise FrameworkRunError(f"the run finished but wrote no {sample_dir}/vision.mp4 or vision.jpg (it wrote: "
                            f"{', '.join(found[:10]) or 'nothing'}; full log: {log_path}).")


def read_output(path: Path, fps: float) -> tuple[np.ndarray, float, np.ndarray | None, int | None]:
    """``(frames, fps, sound, sample_rate)`` of ``vision.mp4``, or of ``vision.jpg`` at the sample's ``fps``."""
    if path.suffix == ".mp4":
        video = media.read_video(path, with_audio=True)
        return video.frames, float(video.fps), video.sound, video.sample_rate
    return media.read_image(path)[None], fps, None, None


def standin_record(sample_dir: Path) -> dict[str, Any]:
    """What the framework stand-in says it is and ran (its ``standin.json`` beside the output)."""
    path = sample_dir / STANDIN_FILE
    if not path.is_file():
        raise FrameworkRunError(f"the framework stand-in wrote no {path}, so what made the output is unknown.")
    return json.loads(path.read_text(encoding="utf-8"))


def cache_flags(step_cache: StepCache) -> list[str]:
    """The framework's flags for a step cache (``None``: the CLI's own default, SeaCache on; ``check_for_backend``
    refused the fields it has no flag for)."""
    if step_cache is None:
        return []
    if step_cache == OFF:
        return [cache_facts.FRAMEWORK_OFF_FLAG]
    assert isinstance(step_cache, SeaCache)
    flags = [cache_facts.FRAMEWORK_ON_FLAG]
    for name, value in step_cache.given().items():
        flag = cache_facts.FIELDS[name][2]
        if flag is not None:
            flags += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return flags


def checkpoint_for(model: str) -> str:
    """The ``--checkpoint-path`` of a model: a framework checkpoint name, or a local folder's absolute path."""
    model = str(model)
    if model in TINY_MODELS:
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


def request_payload(request: GenerationRequest, *, name: str, image_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The framework sample of a request: what it says and nothing it leaves unset, so the framework's defaults apply;
    conditioning arrays are written to ``image_dir``."""
    request = request.resolve()
    check_request(request)
    if request.is_action:
        return _action_payload(request, name=name, folder=Path(image_dir))
    bucket = _bucket(request)
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
        payload["vision_path"] = _media_path(request, Path(image_dir), video=False)
    if request.mode == "video2video":
        payload["vision_path"] = _media_path(request, Path(image_dir), video=True)
        if request.explicit("condition_frames"):
            payload["condition_frame_indexes_vision"] = list(request.condition_frames)
        if request.explicit("condition_video_keep"):
            payload["condition_video_keep"] = request.condition_video_keep
    return payload


def _action_payload(request: GenerationRequest, *, name: str, folder: Path) -> dict[str, Any]:
    """An action request as the framework's action sample (inputs/omni/action_*.json): ``image_size`` is the action
    tier, the trajectory a ``[T][D]`` JSON file (inference/action.py:56-58), policy is ``wam``."""
    payload: dict[str, Any] = {
        "name": name, "model_mode": ap.FRAMEWORK_MODES[request.mode], "prompt": request.prompt_text(),
        "domain_name": request.embodiment, "action_chunk_size": request.num_frames - 1,
        "image_size": int(request.tier), "fps": int(request.fps), "num_steps": request.num_inference_steps,
        "guidance": request.guidance_scale, "shift": request.flow_shift, "seed": request.seed}
    if request.guidance_interval is not None:  # read for every sample, actions too (inference.py:1709)
        payload["guidance_interval"] = list(fw.to_strict(request.guidance_interval))
    if request.view_point is not None:
        payload["view_point"] = request.view_point
    payload["vision_path"] = _media_path(request, folder, video=request.video is not None)
    if request.actions is not None:
        target = folder / f"{request.fingerprint()}-actions.json"
        if not target.exists():
            save_trajectory(target, request.actions)
        payload["action_path"] = str(target)
    return payload


def check_request(request: GenerationRequest) -> None:
    """Refuse, before anything is written, what the framework's sample cannot say as the request asks."""
    if not request.is_action:
        _bucket(request)
    if not float(request.fps).is_integer():
        raise ValidationError("fps", f"the framework's fps is an integer, not {request.fps:g}.",
                              f"use fps={math.floor(request.fps)} or {math.ceil(request.fps)}.")
    if request.use_system_prompt is not None:
        raise ValidationError("use_system_prompt", "the framework's system prompt is a model-config setting "
                              "(Nano/Super/Edge: off), not a sample field.",
                              "leave use_system_prompt out on the framework backend, or run on diffusers/vLLM-Omni.")
    if request.is_action:
        if request.negative_prompt is not None:
            raise ValidationError("negative_prompt", "the framework's action batch has no negative caption "
                                  "(inference.py get_sample_data: get_action_sample_data takes none), so it would be "
                                  "ignored.", "leave negative_prompt out, or run the request on diffusers.")
        return
    for name in ("add_resolution_template", "add_duration_template"):
        if getattr(request, name) is False:
            raise ValidationError(name, "the framework always appends its sentence templates to a plain-text prompt.",
                                  f"leave {name} out on the framework backend, or use a structured (JSON) caption.")


def _bucket(request: GenerationRequest) -> tuple[str, str] | None:
    """The request's framework bucket ``(tier, aspect)``, checked; ``None`` for an edit keeping its input's shape."""
    bucket = (request.tier, request.aspect_ratio) if request.tier else bucket_of(request.width, request.height)
    if request.keeps_image_size:
        return None
    if bucket is None or bucket[0] not in fw.TIERS:
        what = f"tier {bucket[0]} (this project's CPU tier)" if bucket else f"{request.width}x{request.height}"
        raise ValidationError("tier" if bucket else "width", f"the framework generates its buckets only "
                              f"({', '.join(fw.TIERS)} x {', '.join(fw.ASPECT_RATIOS)}), not {what}.",
                              "use tier= and aspect_ratio= with a framework tier (e.g. tier='480'), or a profile "
                              "other than 'tiny'; or run on diffusers.")
    return bucket


def _media_path(request: GenerationRequest, folder: Path, *, video: bool) -> str:
    """The conditioning image or video as a file the framework can read: its own path, or an array written once."""
    source = request.video if video else request.image
    if isinstance(source, (str, os.PathLike)):
        return str(Path(source).expanduser().resolve())
    target = folder / f"{request.fingerprint()}{'.mp4' if video else '.png'}"
    if not target.exists():
        if video:
            media.write_mp4(target, request.conditioning_video(), request.fps)
        else:
            media.write_png(target, np.asarray(request.conditioning_image()))
    return str(target)

