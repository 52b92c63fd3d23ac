"""Media a video request brings: an uploaded ``input_reference``, an ``image_reference`` / ``video_reference``
(data:, http(s):// when allowed, file:// under ``--allowed-local-media-path``), and transfer controls.

As on vLLM-Omni the kind is decided by content (an image if PIL opens it, else a video), never by name or MIME type.
All is held to :class:`~.settings.ServerLimits` *before* decoding (an image's pixels from its header, so a
decompression bomb costs nothing; a video's size, frames and duration from its container).

A hint in ``extra_params`` or an uploaded ``control_reference`` + ``control_type`` make a request a transfer
(cosmos3/transfer.py), checked with the pairing rules and wording of video/generation/helpers.py:636-695; vLLM-Omni
reports most hint mistakes as a 500 from inside its pipeline, the stand-in as a 400 up front.
"""

from __future__ import annotations

import base64
import io
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from struct import error as struct_error
from typing import Any, Callable

import av
import httpx
from PIL import Image, UnidentifiedImageError

from ... import media
from ...protocol import vllm_omni as vo
from ...specs.download import TooLarge, download
from .settings import ServerLimits
from .models import ApiError, bad_request, value_error


@dataclass
class Uploads:
    """Files a request wrote under the upload folder; ``discard`` removes them (idempotent)."""

    folder: Path
    stem: str
    paths: list[Path] = field(default_factory=list)

    def write(self, name: str, content: bytes) -> Path:
        """Persist ``content`` under a name of ours (never the client's file name)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{self.stem}_{name}.mp4"
        path.write_bytes(content)
        self.paths.append(path)
        return path

    def discard(self) -> None:
        for path in self.paths:
            path.unlink(missing_ok=True)


@dataclass
class Reference:
    """The conditioning input: an RGB PIL image, or a video file; ``size`` is its ``(width, height)``."""

    size: tuple[int, int]
    image: Any = None
    video: Path | None = None

    @property
    def kind(self) -> str:
        return "image" if self.image is not None else "video"


def read_reference(upload: bytes | None, image_reference: Any, video_reference: Any, uploads: Uploads,
                   limits: ServerLimits) -> Reference | None:
    """The request's one conditioning input, or ``None``; 400 for an unreadable, oversized or doubled one."""
    if upload is not None and (image_reference is not None or video_reference is not None):
        raise bad_request("Provide only one of input_reference, image_reference, or video_reference when using "
                          "input_reference; image_reference and video_reference may be combined.")
    if image_reference is not None and video_reference is not None:
        raise value_error("Cosmos3 non-action generation accepts either image or video input, not both.")
    if upload is not None:
        return sniff(upload, "input_reference", uploads, limits)
    for name, key, reference in (("image_reference", "image_url", image_reference),
                                 ("video_reference", "video_url", video_reference)):
        if reference is not None:
            return sniff(fetch(reference, name, key, limits), name, uploads, limits)
    return None


def sniff(content: bytes, name: str, uploads: Uploads, limits: ServerLimits) -> Reference:
    """An image if PIL reads it (pixels checked from the header first), else a video file (probed)."""
    if not content:
        raise bad_request(f"Invalid {name}: the file is empty", param=name)
    try:
        with Image.open(io.BytesIO(content)) as probe:
            pixels = probe.width * probe.height
            if pixels > limits.max_image_pixels:
                raise bad_request(f"Invalid {name}: the image has {pixels} pixels ({probe.width}x{probe.height}), "
                                  f"above the limit of {limits.max_image_pixels}", param=name)
            probe.verify()
        image = Image.open(io.BytesIO(content)).convert("RGB")
        return Reference(image.size, image=image)
    except Image.DecompressionBombError as exc:
        raise bad_request(f"Invalid {name}: {exc}", param=name) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError, IndexError, struct_error):
        pass  # not an image (or a broken one): try it as a video
    path = uploads.write(name, content)
    info = check_video(path, name, limits)
    return Reference((int(info["width"]), int(info["height"])), video=path)


def check_video(path: Path, name: str, limits: ServerLimits) -> dict[str, Any]:
    """Probe a video file (400 if unreadable) and hold it to the pixel, frame and duration limits."""
    try:
        info = media.probe_video(path)
        if not info.get("frames"):  # not stated by the container: demux (no decoding) one packet past the limit
            with av.open(str(path)) as container:
                packets = (packet for packet in container.demux(container.streams.video[0]) if packet.size)
                info["frames"] = sum(1 for _ in itertools.islice(packets, limits.max_video_frames + 1))
    except Exception as exc:  # PyAV raises many types
        raise bad_request(f"Invalid {name}: not a readable image or video ({type(exc).__name__})",
                          param=name) from None
    pixels, frames, fps = int(info["width"]) * int(info["height"]), int(info.get("frames") or 0), info.get("fps") or 0
    if pixels > limits.max_image_pixels:
        problem = (f"video frames have {pixels} pixels ({info['width']}x{info['height']}), above the limit of "
                   f"{limits.max_image_pixels}")
    elif frames > limits.max_video_frames:
        problem = f"the video has {frames} frames, above the limit of {limits.max_video_frames}"
    elif fps and frames / fps > limits.max_video_seconds:
        problem = f"the video lasts {frames / fps:.1f} s, above the limit of {limits.max_video_seconds:g} s"
    else:
        return info
    raise bad_request(f"Invalid {name}: {problem}", param=name)


def fetch(reference: Any, name: str, key: str, limits: ServerLimits) -> bytes:
    """The bytes of a ``{key: url}`` reference; a ``file_id`` or an unsupported scheme is a 400."""
    url = getattr(reference, key, None)
    if url is None:
        raise bad_request(f"{name}: file_id references are not supported; upload input_reference or send {key}",
                          param=name)
    if url.startswith("data:"):
        try:
            return base64.b64decode(url.split(",", 1)[1])
        except (IndexError, ValueError) as exc:
            raise bad_request(f"{name}: bad data URL ({exc})", param=name) from None
    if url.startswith(("http://", "https://")):
        if not limits.allow_url_fetch:
            raise bad_request(f"{name}: this server does not fetch URLs ({url}); upload the file as input_reference, "
                              "send a data: URL, or start the server with --allow-url-fetch", param=name)
        buffer = io.BytesIO()
        try:
            download(url, buffer, timeout=limits.fetch_timeout, max_bytes=limits.max_request_bytes)
        except TooLarge:
            raise ApiError(413, f"{name}: {url} is larger than the upload limit of {limits.max_request_bytes} "
                                "bytes") from None
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            raise bad_request(f"{name}: could not fetch {url} ({type(exc).__name__}: {exc})", param=name) from None
        return buffer.getvalue()
    if url.startswith("file://"):
        path = local_media(url, f"{name}.{key}", limits)
        if path.stat().st_size > limits.max_request_bytes:
            raise ApiError(413, f"{name}: the file is larger than the upload limit of {limits.max_request_bytes} "
                                "bytes")
        return path.read_bytes()
    raise bad_request(f"{name}: {key} must be an http(s), data: or (under --allowed-local-media-path) file:// URL",
                      param=name)


def local_media(value: str, what: str, limits: ServerLimits) -> Path:
    """A server-local file named in a request, allowed only under the configured media roots (400 otherwise)."""
    try:
        return limits.local_path(value, what)
    except (PermissionError, FileNotFoundError) as exc:
        raise value_error(str(exc), param=what) from None


# ``(form_fields, extra_params, rgb_video_path, control_paths) -> Generation``: runs a transfer request.
TransferRunner = Callable[[dict, dict, "Path | None", "dict[str, Path]"], Any]


@dataclass
class TransferInputs:  # the runner's arguments, in order
    form_fields: dict[str, str]
    extra_params: dict[str, Any]
    rgb_video_path: Path | None = None
    control_paths: dict[str, Path] = field(default_factory=dict)


def control_type(declared: str | None, uploaded: bool, extra: dict[str, Any]) -> str | None:
    """The pairing of ``control_reference`` and ``control_type``; the normalised type, or ``None``."""
    if not uploaded:
        if declared is not None:
            raise bad_request("control_type requires a control_reference upload.", param="control_type")
        return None
    if declared is None or not declared.strip():
        raise bad_request("control_reference requires control_type.", param="control_type")
    kind = declared.strip().lower()
    if kind not in vo.HINT_KINDS:
        raise bad_request(f"Control upload type '{kind}' is not supported by this model. Supported control upload "
                          f"types: {', '.join(sorted(vo.HINT_KINDS))}.", param="control_type")
    existing = extra.get(kind)
    if existing is not None and existing is not True and not isinstance(existing, dict):
        raise bad_request(f"extra_params.{kind} must be an object when control_reference is uploaded.")
    if isinstance(existing, dict) and any(existing.get(key) is not None for key in ("control", "control_path")):
        raise bad_request(f"Provide either control_reference or extra_params.{kind}.control/control_path, not both.")
    return kind


def hints(extra: dict[str, Any]) -> list[str]:
    return [kind for kind in vo.HINT_KINDS if extra.get(kind) is not None]


def check(extra: dict[str, Any], uploaded_kind: str | None) -> bool:
    """Validate the transfer keys of ``extra``; True when the request is a transfer."""
    selected = hints(extra)
    for kind in selected:
        _check_hint(kind, extra[kind], uploaded_kind)
    if extra.get("control_guidance_interval") is not None:
        lo, hi = interval(extra["control_guidance_interval"], "control_guidance_interval")
        if not lo <= hi:
            raise value_error(f"extra_params.control_guidance_interval must be ordered as [lo, hi], got "
                              f"{extra['control_guidance_interval']!r}", param="extra_params.control_guidance_interval")
    transfer = bool(selected) or uploaded_kind is not None
    stray = [key for key in vo.TRANSFER_ONLY if extra.get(key) is not None]
    if stray and not transfer:
        raise value_error(f"extra_params.{stray[0]}: Cosmos3 transfer options were provided, but no transfer hint "
                          f"was selected; add one of {', '.join(vo.HINT_KINDS)}.", param=f"extra_params.{stray[0]}")
    return transfer


def _check_hint(kind: str, value: Any, uploaded_kind: str | None) -> None:
    where = f"extra_params.{kind}"
    if value is True or isinstance(value, str):
        if value is True and kind not in vo.COMPUTABLE_HINTS and uploaded_kind != kind:
            raise value_error(f"{where}: true computes the map from the input video, which only edge and blur "
                              "support; give a control_path or upload control_reference", param=where)
        return
    if not isinstance(value, dict):
        raise value_error(f"{where} must be true, a path string or an object, got {value!r}", param=where)
    if unknown := sorted(set(value) - set(vo.HINT_FIELDS[kind])):
        raise value_error(f"{where}: unsupported field(s) {', '.join(unknown)}; supported: "
                          f"{', '.join(vo.HINT_FIELDS[kind])}", param=where)
    weight = value.get("control_weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
        raise value_error(f"{where}.control_weight must be a finite number >= 0, got {weight!r}",
                          param=f"{where}.control_weight")
    for name, allowed in vo.PRESET_CHOICES.items():
        preset = value.get(name)
        if name in vo.HINT_FIELDS[kind] and preset is not None and str(preset).lower() not in allowed:
            raise value_error(f"{where}.{name} must be one of {', '.join(allowed)}, got {preset!r}",
                              param=f"{where}.{name}")
    if value.get("control_path") is not None and not isinstance(value["control_path"], str):
        raise value_error(f"{where}.control_path must be a string path", param=f"{where}.control_path")


def interval(value: Any, name: str) -> tuple[float, float]:
    """``[lo, hi]`` or ``"lo,hi"`` of ``extra_params[name]`` as two floats (400 otherwise)."""
    try:
        lo, hi = (float(v) for v in ([p for p in value.split(",") if p.strip()] if isinstance(value, str) else value))
    except (TypeError, ValueError):
        raise value_error(f"extra_params.{name} must be [lo, hi] or 'lo,hi', got {value!r}",
                          param=f"extra_params.{name}") from None
    return lo, hi


def inputs(form_fields: dict[str, str], extra: dict[str, Any], reference: Reference | None, control: bytes | None,
           uploaded_kind: str | None, uploads: Uploads, limits: ServerLimits) -> TransferInputs:
    """Resolve local paths, persist the uploaded control and collect what the runner needs."""
    if reference is not None and reference.kind == "image":
        raise value_error("Cosmos3 transfer accepts video inputs, not images: upload the RGB video as "
                          "input_reference.", param="input_reference")
    extra, paths = dict(extra), {}
    for kind in hints(extra):
        value = extra[kind]
        if isinstance(value, str):
            paths[kind] = local_media(value, f"extra_params.{kind}", limits)
            extra[kind] = str(paths[kind])
        elif isinstance(value, dict) and value.get("control_path") is not None:
            paths[kind] = local_media(value["control_path"], f"extra_params.{kind}.control_path", limits)
            extra[kind] = {**value, "control_path": str(paths[kind])}
    if control is not None and uploaded_kind is not None:
        paths[uploaded_kind] = path = uploads.write(f"control_{uploaded_kind}", control)
        check_video(path, "control_reference", limits)
        hint = extra.get(uploaded_kind)
        extra[uploaded_kind] = {**(hint if isinstance(hint, dict) else {}), "control_path": str(path)}
    return TransferInputs(form_fields=form_fields, extra_params=extra,
                          rgb_video_path=reference.video if reference is not None else None,
                          control_paths={kind: paths[kind] for kind in vo.HINT_KINDS if kind in paths})
