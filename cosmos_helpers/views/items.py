"""One viewable thing, whatever it came from (a :class:`Generation`, a saved file, frames), with its caption."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import media
from ..presets import SOUND_SAMPLE_RATE
from ..prompts import caption_summary
from ..result import MANIFEST_SCHEMA, Generation, backend_label, read_manifest

SEP = " \u00b7 "


@dataclass
class Item:
    label: str = ""
    path: Path | None = None            # the media file (full resolution), if saved
    kind: str = "video"                 # "video" or "image"
    fps: float = 24.0
    width: int = 0
    height: int = 0
    num_frames: int = 0
    has_sound: bool = False
    summary: str = ""                   # prompt summary
    details: dict[str, Any] = field(default_factory=dict)  # mode, seed, backend, model, steps, total_s, ...
    _frames: np.ndarray | None = None
    _sound: np.ndarray | None = None
    sample_rate: int = SOUND_SAMPLE_RATE
    is_output: bool = False             # a saved result (has a manifest): its preview may live beside it

    @property
    def is_image(self) -> bool:
        return self.kind == "image"

    def frames(self) -> np.ndarray:
        """uint8 ``(T, H, W, 3)``; decoded from the file on first use when not in memory."""
        if self._frames is None:
            if self.path is None:
                raise ValueError("item has neither frames nor a file")
            is_image = self.path.suffix.lower() in media.IMAGE_SUFFIXES
            self._frames = media.read_image(self.path)[None] if is_image else media.read_video(self.path).frames
        return self._frames

    def frame(self, index: int | None = None) -> np.ndarray:
        """One frame (default: the middle one, which represents a clip better than its first)."""
        if self._frames is None and self.path is not None and not self.is_image and index in (None, 0):
            # Decode only as far as needed for a poster.
            want = 1 if index == 0 else max(1, (self.num_frames or 1) // 2 + 1)
            return media.read_video(self.path, max_frames=want).frames[-1]
        frames = self.frames()
        index = frames.shape[0] // 2 if index is None else index
        return frames[max(0, min(int(index), frames.shape[0] - 1))]

    def sound(self) -> tuple[np.ndarray | None, int]:
        if self._sound is None and self.has_sound and self.path is not None:
            self._sound, rate = media.read_audio(self.path)
            self.sample_rate = int(rate or self.sample_rate)
        return self._sound, self.sample_rate

    def facts(self) -> list[str]:
        """Short facts for a caption line: mode, size, length, sound, steps, seed, backend:model, time."""
        d = self.details
        facts = (d.get("mode") and str(d["mode"]),
                 self.width and self.height and f"{self.width}\u00d7{self.height}",
                 not self.is_image and self.num_frames and f"{self.num_frames} frames @ {self.fps:g} fps",
                 self.has_sound and "sound",
                 d.get("steps") and f"{d['steps']} steps",
                 d.get("seed") is not None and f"seed {d['seed']}",
                 ":".join(str(x) for x in (d.get("backend"), d.get("model")) if x),
                 d.get("total_s") and f"{float(d['total_s']):.1f} s",
                 d.get("passes") and f"{d['passes'][0]} of {d['passes'][1]} passes computed (step cache)",
                 d.get("psnr") is not None and f"PSNR {d['psnr']}")
        return [fact for fact in facts if fact]

    def caption_html(self) -> str:
        lines = ((self.label, "font-weight:600"), (self.summary, "margin:2px 0"),
                 (SEP.join(self.facts()), "color:#666;font-size:90%"))
        inner = "".join(f'<div style="{style}">{html.escape(text)}</div>' for text, style in lines if text)
        return f'<div class="cosmos-helpers-caption" style="line-height:1.35">{inner}</div>'

    def caption_text(self) -> str:
        return " | ".join(x for x in (self.label, self.summary, SEP.join(self.facts())) if x)


def as_item(source: Any, label: str | None = None, *, fps: float = 24.0) -> Item:
    """An :class:`Item` from a Generation, a path (media file or its manifest) or a uint8 array."""
    if isinstance(source, Item):
        if label:
            source.label = label
        return source
    if isinstance(source, Generation):
        return _from_generation(source, label)
    if isinstance(source, (str, Path)):
        return _from_path(Path(source), label)
    if hasattr(source, "size") and hasattr(source, "mode") and not isinstance(source, np.ndarray):  # PIL image
        source = np.asarray(source.convert("RGB"))
    if isinstance(source, np.ndarray):
        frames = media.to_uint8(source)
        if frames.ndim == 2:
            frames = np.repeat(frames[..., None], 3, axis=-1)
        if frames.ndim == 3:
            frames = frames[None]
        if frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"expected frames (T,H,W,3) or an image (H,W,3), got shape {source.shape}")
        return Item(label=label or "", kind="image" if frames.shape[0] == 1 else "video", fps=float(fps),
                    width=frames.shape[2], height=frames.shape[1], num_frames=frames.shape[0], _frames=frames)
    raise TypeError(f"cannot show a {type(source).__name__}; pass a Generation, a file path or a uint8 array")


def request_details(record: dict[str, Any], **facts: Any) -> tuple[str, dict[str, Any]]:
    """Caption summary and (mode, steps, guidance, shift, plus ``facts``) of a request record: a
    ``GenerationRequest.to_dict()``, a framework input run's record (``model_mode``, ``num_steps``, ``guidance``),
    or a manifest's ``request``."""
    summary = caption_summary(record["prompt"]) if isinstance(record.get("prompt"), (str, dict)) else ""
    first = lambda *keys: next((record[k] for k in keys if record.get(k) is not None), None)  # noqa: E731
    return summary, {"mode": first("mode", "model_mode"), "steps": first("num_inference_steps", "num_steps"),
                     "guidance": first("guidance_scale", "guidance"), "shift": first("flow_shift", "shift"), **facts}


def _cached_passes(provenance: dict[str, Any]) -> tuple[int, int] | None:
    """(computed, all) guidance passes of a generation that ran with a step cache, else ``None``."""
    cache = provenance.get("step_cache") or {}
    if cache.get("method") in (None, "off") or "passes" not in cache:
        return None
    return int(cache["passes_computed"]), int(cache["passes"])


def _from_generation(gen, label: str | None) -> Item:
    record = gen.request.to_dict() if gen.request is not None else (
        (gen.provenance.get("manifest") or {}).get("request") or {})
    summary, details = request_details(record, seed=gen.seed, backend=backend_label(gen.backend, gen.standin),
                                       model=gen.model,
                                       total_s=gen.total_seconds if gen.timings else None,
                                       passes=_cached_passes(gen.provenance))
    path = gen.paths.get("media") if gen.paths else None
    return Item(label=label or "", path=Path(path) if path else None, is_output=path is not None,
                kind="image" if gen.is_image else "video",
                fps=float(gen.fps), width=gen.width, height=gen.height, num_frames=gen.num_frames,
                has_sound=gen.sound is not None, summary=summary, details=details, _frames=gen.frames,
                _sound=gen.sound, sample_rate=int(gen.sample_rate))


def _from_path(path: Path, label: str | None) -> Item:
    manifest = None
    if path.suffix.lower() == ".json":
        manifest = read_manifest(path)
        if not manifest or manifest.get("schema") != MANIFEST_SCHEMA or not manifest.get("media"):
            raise ValueError(f"{path} is not a cosmos-helpers generation manifest")
        path = path.with_name(manifest["media"])
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    if manifest is None:
        candidate = read_manifest(path.with_suffix(".json"))
        if candidate and candidate.get("schema") == MANIFEST_SCHEMA and candidate.get("media") == path.name:
            manifest = candidate
    if path.suffix.lower() in media.IMAGE_SUFFIXES:
        from PIL import Image

        with Image.open(path) as img:
            item = Item(label=label or "", path=path, kind="image", width=img.width, height=img.height, num_frames=1)
    else:
        info = media.probe_video(path)
        item = Item(label=label or "", path=path, width=info["width"], height=info["height"],
                    fps=float(info["fps"] or 24.0), num_frames=int(info["frames"] or 0),
                    has_sound=info["audio_rate"] is not None, sample_rate=int(info["audio_rate"] or SOUND_SAMPLE_RATE))
    if manifest:
        item.is_output = True
        item.summary, item.details = request_details(
            manifest.get("request") or {}, seed=manifest.get("seed"),
            backend=backend_label(manifest.get("backend"), manifest.get("standin")),
            model=manifest.get("model"), total_s=(manifest.get("timings") or {}).get("total_s"),
            passes=_cached_passes(manifest.get("provenance") or {}))
        item.fps = float(manifest.get("fps") or item.fps)
        item.num_frames = int(manifest.get("num_frames") or item.num_frames)
    return item
