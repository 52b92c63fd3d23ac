"""``Generation``: what any backend returns, and how it is saved so that nothing is ever lost.

``save()`` writes the media (a backend's own file byte for byte, else PNG or H.264 + AAC), then a JSON manifest of
the resolved request, backend, versions and timings; both atomic, never clobbering. A rerun asks :func:`find_saved`
whether this request's finished output *on the same backend* is already there.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping, Protocol

import numpy as np

from . import media
from .errors import OutputExistsError
from .presets import SOUND_SAMPLE_RATE


class Recorded(Protocol):
    """What a manifest records about the request behind an output: a ``GenerationRequest``, or a framework input
    sample's resolved run. Its fingerprint is what makes a rerun recognise its own output."""

    def fingerprint(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


def record_fingerprint(record: dict[str, Any]) -> str:
    """A stable hash of everything in a request's record that changes the output, but guardrails: they only let an
    output through or not (:func:`find_saved` does not let an unchecked output serve a request asking for them)."""
    record = {key: value for key, value in record.items() if key != "guardrails"}
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()[:16]


MANIFEST_SUFFIX = ".json"
MANIFEST_SCHEMA = "cosmos-helpers/generation/v1"
MEDIA_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".mp4")


@dataclass(frozen=True)
class FinishedFile:
    """Media exactly as a backend delivered it: the bytes of an HTTP answer, or a file it wrote."""

    suffix: str
    data: bytes | None = None
    path: Path | None = None

    def publish(self, target: Path, *, overwrite: bool) -> Path:
        if self.data is not None:
            return media.write_bytes_atomic(target, self.data, overwrite=overwrite)
        return media.copy_file_atomic(self.path, target, overwrite=overwrite)


@dataclass
class Generation:
    """A finished generation: uint8 ``frames`` ``(T, H, W, 3)`` (``T == 1`` for images), float32 ``sound`` ``(2, N)``
    in [-1, 1] or ``None``, phase ``timings`` in seconds; ``finished`` is the backend's own file (saved as it is),
    ``crf`` the H.264 quality frames made here are saved at, ``actions`` the float32 ``(T, D)`` trajectory an action
    mode predicted; ``settings`` the backend's ``output_settings()`` (dtype, scheduler, ...); ``standin``, for a
    stand-in's output, which backend it stands in for (``of``) and what really ran (``model_run``)."""

    frames: np.ndarray
    fps: float
    seed: int
    request: Recorded | None = None
    sound: np.ndarray | None = None
    sample_rate: int = SOUND_SAMPLE_RATE
    backend: str = ""
    model: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)
    finished: FinishedFile | None = None
    crf: int = media.DEFAULT_CRF
    actions: np.ndarray | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    standin: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        frames = media.to_uint8(np.asarray(self.frames))
        if frames.ndim == 3:
            frames = frames[None]
        if frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"frames must be (T, H, W, 3), got {frames.shape}")
        self.frames = frames
        if self.sound is not None:  # a mono (N,) track as (1, N)
            self.sound = np.atleast_2d(np.asarray(self.sound, dtype=np.float32))
        if self.actions is not None:
            self.actions = np.asarray(self.actions, dtype=np.float32)

    @property
    def is_image(self) -> bool:
        return self.frames.shape[0] == 1

    @property
    def width(self) -> int:
        return int(self.frames.shape[2])

    @property
    def height(self) -> int:
        return int(self.frames.shape[1])

    @property
    def num_frames(self) -> int:
        return int(self.frames.shape[0])

    @property
    def duration_s(self) -> float:
        return 0.0 if self.is_image else self.num_frames / self.fps

    @property
    def image(self):
        """The first frame as a PIL image (the picture of a text2image generation)."""
        from PIL import Image

        return Image.fromarray(self.frames[0])

    @property
    def total_seconds(self) -> float:
        return float(self.timings.get("total_s", sum(v for k, v in self.timings.items() if k.endswith("_s"))))

    def __repr__(self) -> str:
        kind = "image" if self.is_image else f"{self.num_frames} frames @ {self.fps:g} fps"
        sound = f", sound {self.sound.shape[1] / self.sample_rate:.2f} s" if self.sound is not None else ""
        return (f"Generation({self.width}x{self.height} {kind}{sound}, seed {self.seed}, "
                f"{backend_label(self.backend, self.standin)}:{self.model})")

    def save(self, stem: str | Path, *, overwrite: bool = False) -> Path:
        """Write ``<stem>.<suffix>`` and ``<stem>.json``; return the media path. Refuses to replace an existing file
        unless ``overwrite=True``; this very request's output on this backend is left alone (a rerun)."""
        stem = Path(stem)
        target = stem.with_suffix(self.finished.suffix if self.finished else ".png" if self.is_image else ".mp4")
        manifest_path = stem.with_suffix(MANIFEST_SUFFIX)
        done = None if overwrite else check_free(stem, self.request, backend=self.backend, settings=self.settings)
        if done is not None and done != target:
            raise OutputExistsError(f"{done} is this request's output in another format; pass overwrite=True "
                                    "or choose another name.")
        if done is None:
            self._replace_media(target, manifest_path, overwrite)
            try:
                media.write_bytes_atomic(manifest_path, json.dumps(self.manifest(target), indent=2).encode(),
                                         overwrite=overwrite)  # check_free found none: one there now is a racing save's
            except BaseException:  # orphan media could never be recognised as finished work: a rerun regenerates it
                target.unlink(missing_ok=True)
                raise
        self.paths = {"media": target, "manifest": manifest_path}
        return target

    def _replace_media(self, target: Path, manifest_path: Path, overwrite: bool) -> None:
        """Write the media; an old manifest is taken away first (a kill before the new one is written must not
        leave it vouching for the new file) and put back if the writing fails while the old media is untouched."""
        old = manifest_path.read_bytes() if overwrite and manifest_path.is_file() else None
        before = _identity(target)
        if old is not None:
            manifest_path.unlink()
        try:
            self._write_media(target, overwrite)
        except BaseException:
            if old is not None and _identity(target) == before:
                media.write_bytes_atomic(manifest_path, old, overwrite=False)
            raise

    def _write_media(self, target: Path, overwrite: bool) -> None:
        stale = [target.with_suffix(s) for s in MEDIA_SUFFIXES if s != target.suffix] if overwrite else []
        if self.finished is not None:
            self.finished.publish(target, overwrite=overwrite)
        elif self.is_image:
            media.write_png(target, self.frames[0], overwrite=overwrite)
        else:
            media.write_mp4(target, self.frames, self.fps, sound=self.sound, sample_rate=self.sample_rate,
                            crf=self.crf, overwrite=overwrite)
        for path in stale:  # other kinds of media from earlier runs at this stem, once this one is out
            path.unlink(missing_ok=True)

    def manifest(self, media_path: Path | None = None) -> dict[str, Any]:
        return {
            "schema": MANIFEST_SCHEMA,
            "media": media_path.name if media_path else None,
            "kind": "image" if self.is_image else "video",
            "width": self.width, "height": self.height, "num_frames": self.num_frames, "fps": self.fps,
            "sound": None if self.sound is None else {"sample_rate": self.sample_rate,
                                                      "channels": int(self.sound.shape[0]),
                                                      "samples": int(self.sound.shape[1])},
            "seed": self.seed,
            "actions": None if self.actions is None else np.asarray(self.actions, dtype=np.float32).tolist(),
            "backend": self.backend,
            "standin": self.standin,
            "settings": json_safe(self.settings),
            "model": self.model,
            "as_delivered": self.finished is not None,
            "fingerprint": self.request.fingerprint() if self.request is not None else None,
            "request": self.request.to_dict() if self.request is not None else None,
            "timings": {k: round(float(v), 4) for k, v in self.timings.items()},
            "provenance": self.provenance,
            "versions": package_versions(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

    @classmethod
    def load(cls, path: str | Path) -> "Generation":
        """Read a saved generation back (media decoded; the request is kept as the manifest's record)."""
        path = Path(path)
        manifest_path = path.with_suffix(MANIFEST_SUFFIX)
        manifest = read_manifest(manifest_path) or {}
        media_path = path if path.suffix in MEDIA_SUFFIXES else path.with_name(manifest.get("media") or path.name)
        if media_path.suffix in media.IMAGE_SUFFIXES:
            video = media.VideoData(media.read_image(media_path)[None], None)
        else:
            video = media.read_video(media_path, with_audio=True)
        generation = cls(frames=video.frames, fps=float(manifest.get("fps") or video.fps or 24.0),
                         seed=int(manifest.get("seed", 0)), sound=video.sound,
                         sample_rate=video.sample_rate or SOUND_SAMPLE_RATE,
                         backend=manifest.get("backend", ""), model=manifest.get("model", ""),
                         settings=dict(manifest.get("settings") or {}), standin=manifest.get("standin"),
                         timings=dict(manifest.get("timings", {})),
                         provenance={"loaded_from": str(media_path), "manifest": manifest},
                         finished=FinishedFile(media_path.suffix, path=media_path), actions=manifest.get("actions"))
        generation.paths = {"media": media_path, "manifest": manifest_path}
        return generation


def backend_label(backend: str | None, standin: Mapping[str, Any] | None = None) -> str:
    """How galleries and captions name the backend of an output: ``framework (stand-in)`` for a stand-in's."""
    return f"{backend or (standin or {}).get('of', '')} (stand-in)" if standin else str(backend or "")


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def existing_output(stem: Path) -> Path | None:
    """Whatever output is at ``stem``: its media, else its manifest."""
    return next((stem.with_suffix(s) for s in (*MEDIA_SUFFIXES, MANIFEST_SUFFIX) if stem.with_suffix(s).exists()), None)


def read_manifest(path: str | Path) -> dict[str, Any] | None:
    try:
        return json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def check_free(stem: str | Path, request: Recorded | None = None, *, backend: str | None = None,
               settings: dict[str, Any] | None = None) -> Path | None:
    """Before any work: ``None`` when ``stem`` is free, the finished media when it is this very request's on this
    backend (a rerun: reuse it); :class:`OutputExistsError` when another run's output is there."""
    stem = Path(stem)
    if (existing := existing_output(stem)) is None:
        return None
    if request is not None and (done := find_saved(stem, request, backend=backend, settings=settings)) is not None:
        return done
    saved = read_manifest(stem.with_suffix(MANIFEST_SUFFIX)) or {}
    if request is not None and saved.get("fingerprint") == request.fingerprint():
        if _unchecked_for(saved, request):
            raise OutputExistsError(f"{existing} is this request's output made without guardrails, and this request "
                                    "asks for them; pass overwrite=True to generate it again with them, or choose "
                                    "another name.")
        if not _same_settings(saved, settings) and saved.get("backend") == backend:
            raise OutputExistsError(f"{existing} is this request's output made with other {backend} settings "
                                    f"({saved.get('settings')} there, {json_safe(settings)} now); pass "
                                    "overwrite=True to generate it again, or choose another name.")
    raise OutputExistsError(f"{existing} already exists from a different run; pass overwrite=True, "
                            "choose another name, or another output folder.")


def find_saved(stem: str | Path, request: Recorded, *, backend: str | None = None,
               settings: dict[str, Any] | None = None) -> Path | None:
    """The finished media a previous run of ``request`` left at ``stem``: the same fingerprint and, when given, the
    same ``backend`` and its ``settings``; an output made without guardrails never serves a request asking for them."""
    stem = Path(stem)
    manifest = read_manifest(stem.with_suffix(MANIFEST_SUFFIX))
    if (not manifest or manifest.get("fingerprint") != request.fingerprint()
            or (backend is not None and manifest.get("backend") != backend)
            or _unchecked_for(manifest, request) or not _same_settings(manifest, settings)):
        return None
    target = stem.with_name(manifest.get("media") or "")
    return target if manifest.get("media") and target.is_file() else None


def _same_settings(manifest: dict[str, Any], settings: dict[str, Any] | None) -> bool:
    """Made with these backend settings (manifests written before settings were recorded carry none: not compared)."""
    return settings is None or "settings" not in manifest or manifest["settings"] == json_safe(settings)


def json_safe(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples as lists, other objects as their text)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _unchecked_for(manifest: dict[str, Any], request: Recorded) -> bool:
    """The saved output skipped the guardrails this request asks for."""
    return bool(request.to_dict().get("guardrails")) and not (manifest.get("request") or {}).get("guardrails")


def package_versions(missing: str | None = None) -> dict[str, str]:
    """Python and the versions of the packages that shape an output; an absent one is left out, or ``missing``."""
    versions = {"python": platform.python_version(), "platform": sys.platform}
    for name in ("cosmos-helpers", "diffusers", "transformers", "torch", "numpy", "av", "httpx"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            if missing is not None:
                versions[name] = missing
    return versions
