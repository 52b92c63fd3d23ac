"""One framework run: its folder (:class:`FrameworkRun`), and the run as a process: its log streamed to a file (the
step counters it prints move a progress bar, a timeout kills it) and its outputs found where the framework's layout
puts them."""

from __future__ import annotations

import collections
import contextlib
import json
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .. import media
from ..errors import FrameworkRunError
from ..protocol import framework as fw
from ..standins import STANDIN_FILE
from ..step_cache import StepCache

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




def stream(cmd: list[str], *, cwd: Path, env: Mapping[str, str], log_path: Path, counter: StepProgress,
           timeout: float | None) -> tuple[int, list[str]]:
    """Run ``cmd``, writing its log as it comes and feeding each line to ``counter``; ``(exit code, log tail)``.
    ``timeout`` kills it after that many seconds. An ``OSError`` (no such program) propagates."""
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
    found = sorted(p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file()) \
        if out_dir.is_dir() else []
    raise FrameworkRunError(f"the run finished but wrote no {sample_dir}/vision.mp4 or vision.jpg (it wrote: "
                            f"{', '.join(found[:10]) or 'nothing'}; full log: {log_path}).")


def read_output(path: Path, fps: float) -> tuple[np.ndarray, float, np.ndarray | None, int | None]:
    """``(frames, fps, sound, sample_rate)`` of the framework's ``vision.mp4``, or of its ``vision.jpg`` (at
    ``fps``, the sample's)."""
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
