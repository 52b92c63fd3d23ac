"""One object that runs framework specs on any backend and keeps the outputs: what the transfer notebook uses.

``SpecRunner(backend, profile=..., output_dir=..., checkout=..., server_url=...)``; ``runner.run(spec)`` returns a
:class:`~cosmos_helpers.result.Generation` (a :class:`TransferGeneration` with its controls on diffusers) and
writes ``<output_dir>/<name>/vision.mp4`` the way the framework lays it out. An existing output is reused (read
back) unless ``overwrite=True``. For ``vllm-omni`` without ``server_url`` a local vLLM-Omni-compatible server with
the transfer hook is started on loopback and stopped by ``close()``. vLLM-Omni has no audio conditioning, so
``audio_image2video`` specs run on diffusers there (said in the result's provenance).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from cosmos_helpers.errors import ValidationError
from cosmos_helpers.result import Generation

BACKENDS = ("diffusers", "framework", "vllm-omni")


class SpecRunner:
    def __init__(self, backend: str = "diffusers", *, profile: str = "tiny", output_dir: str | os.PathLike[str] =
                 "outputs/transfer", checkout: str | None = None, server_url: str | None = None,
                 overwrite: bool = False, progress: bool = True) -> None:
        if backend not in BACKENDS:
            raise ValidationError("backend", f"unknown backend {backend!r}.", f"use one of {', '.join(BACKENDS)}.")
        if backend == "framework" and not checkout:
            raise ValidationError("framework_checkout", "the framework backend needs a cosmos-framework checkout.",
                                  "set framework_checkout to its path (on a GPU host), or use backend='diffusers'.")
        self.backend, self.profile, self.checkout = backend, profile, checkout
        self.output_dir = Path(output_dir)
        self.server_url, self.overwrite, self.progress = server_url, overwrite, progress
        self._server = None

    def __enter__(self) -> "SpecRunner":
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
            from cosmos_helpers.server.local import ThreadedServer
            from cosmos_helpers.transfer.vllm import make_transfer_runner

            self._server = ThreadedServer(profile=self.profile, warmup=False,
                                          transfer_runner=make_transfer_runner(self.profile)).start()
        return self._server.url

    def run(self, spec: Any) -> Generation:
        """Run one spec (file or :class:`TransferSpec`); returns the result and saves ``<out>/<name>/vision.mp4``."""
        from cosmos_helpers import media
        from cosmos_helpers.transfer.spec import TransferSpec, load_spec

        if not isinstance(spec, TransferSpec):
            spec = load_spec(spec, validate=False)
        spec.validate(tiers=("128", "256", "480", "720", "768"))
        name = spec.name or "transfer"
        target = self.output_dir / name / "vision.mp4"
        is_audio = not spec.hints
        backend = "diffusers" if (is_audio and self.backend == "vllm-omni") else self.backend
        if target.exists() and not self.overwrite:
            generation = Generation.load(target) if target.with_suffix(".json").exists() else _from_mp4(target)
            generation.provenance["reused"] = str(target)
            return generation
        if backend == "diffusers":
            from cosmos_helpers.transfer.diffusers_transfer import TransferGeneration, run_spec

            generation = run_spec(spec, profile=self.profile, progress=self.progress)
            if isinstance(generation, TransferGeneration):
                generation.save_framework_layout(self.output_dir, name, overwrite=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                media.write_mp4(target, generation.frames, generation.fps, sound=generation.sound,
                                sample_rate=generation.sample_rate, overwrite=True)
        elif backend == "framework":
            from cosmos_helpers.backends.framework import FrameworkBackend

            generation = FrameworkBackend(self.checkout, progress=self.progress).transfer(spec, name=name)
            produced = Path(generation.provenance["output"])
            target.parent.mkdir(parents=True, exist_ok=True)
            for path in produced.parent.glob("*.mp4"):
                shutil.copyfile(path, target.parent / path.name)
        else:
            from cosmos_helpers.backends.vllm_omni import VllmOmniBackend

            with VllmOmniBackend(self.url(), progress=self.progress) as client:
                generation = client.transfer(spec, profile=self.profile)
            media.write_mp4(target, generation.frames, generation.fps, overwrite=self.overwrite)
        if is_audio and self.backend == "vllm-omni":
            generation.provenance["note"] = "vLLM-Omni has no audio conditioning; this ran on diffusers."
        return generation


def _from_mp4(path: Path) -> Generation:
    from cosmos_helpers import media

    video = media.read_video(path, with_audio=True)
    return Generation(frames=video.frames, fps=float(video.fps or 24), seed=0, sound=video.sound,
                      provenance={"output": str(path)})


__all__ = ["SpecRunner"]
