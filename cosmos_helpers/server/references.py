"""Media a video request brings: an uploaded ``input_reference``, an ``image_reference`` / ``video_reference``
(data:, http(s):// when allowed, file:// under ``--allowed-local-media-path``), and server-local control paths.

As on vLLM-Omni the kind is decided by content (an image if PIL opens it, else a video), never by file name or
MIME type. Everything is held to :class:`~.limits.ServerLimits` *before* it is decoded: an image's pixel count
from its header (a decompression bomb costs nothing), a video's frame size, count and duration from its
container. Uploaded videos are kept as files under the server's upload folder (``Uploads`` removes them when
the request fails or its work is done).
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from pathlib import Path
from struct import error as struct_error
from typing import Any

from .. import media
from .errors import ApiError, bad_request, value_error
from .limits import ServerLimits


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
    """The conditioning input: an RGB PIL image, or a video file."""

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
    if image_reference is not None:
        return sniff(fetch(image_reference, "image_reference", "image_url", limits), "image_reference", uploads,
                     limits)
    if video_reference is not None:
        return sniff(fetch(video_reference, "video_reference", "video_url", limits), "video_reference", uploads,
                     limits)
    return None


def sniff(content: bytes, name: str, uploads: Uploads, limits: ServerLimits) -> Reference:
    """An image if PIL reads it (pixels checked from the header first), else a video file (probed)."""
    from PIL import Image, UnidentifiedImageError

    if not content:
        raise bad_request(f"Invalid {name}: the file is empty", param=name)
    try:
        with Image.open(io.BytesIO(content)) as probe:
            pixels = probe.width * probe.height
            if pixels > limits.max_image_pixels:
                raise bad_request(f"Invalid {name}: the image has {pixels} pixels ({probe.width}x{probe.height}), "
                                  f"above the limit of {limits.max_image_pixels}", param=name)
            probe.verify()
        return Reference(image=Image.open(io.BytesIO(content)).convert("RGB"))
    except ApiError:
        raise
    except Image.DecompressionBombError as exc:
        raise bad_request(f"Invalid {name}: {exc}", param=name) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError, IndexError, struct_error):
        pass  # not an image (or a broken one): try it as a video
    path = uploads.write(name, content)
    check_video(path, name, limits)
    return Reference(video=path)


def check_video(path: Path, name: str, limits: ServerLimits) -> dict[str, Any]:
    """Probe a video file (400 if unreadable) and hold it to the pixel, frame and duration limits."""
    try:
        info = media.probe_video(path)
        if not info.get("frames"):
            info["frames"] = _count_frames(path, limits.max_video_frames + 1)
    except Exception as exc:  # PyAV raises many types
        raise bad_request(f"Invalid {name}: not a readable image or video ({type(exc).__name__})",
                          param=name) from None
    pixels = int(info["width"]) * int(info["height"])
    problems = []
    if pixels > limits.max_image_pixels:
        problems.append(f"video frames have {pixels} pixels ({info['width']}x{info['height']}), above the limit "
                        f"of {limits.max_image_pixels}")
    frames, fps = int(info.get("frames") or 0), info.get("fps") or 0
    if frames > limits.max_video_frames:
        problems.append(f"the video has {frames} frames, above the limit of {limits.max_video_frames}")
    if fps and frames / fps > limits.max_video_seconds:
        problems.append(f"the video lasts {frames / fps:.1f} s, above the limit of {limits.max_video_seconds:g} s")
    if problems:
        raise bad_request(f"Invalid {name}: {problems[0]}", param=name)
    return info


def _count_frames(path: Path, stop_after: int) -> int:
    """Demux (no decoding) up to ``stop_after`` video packets when the container does not state a count."""
    import av

    count = 0
    with av.open(str(path)) as container:
        for packet in container.demux(container.streams.video[0]):
            if packet.size:
                count += 1
                if count >= stop_after:
                    break
    return count


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
        return _download(url, name, limits)
    if url.startswith("file://"):
        path = local_media(url, f"{name}.{key}", limits)
        if path.stat().st_size > limits.max_request_bytes:
            raise ApiError(413, f"{name}: the file is larger than the upload limit of {limits.max_request_bytes} "
                                "bytes")
        return path.read_bytes()
    raise bad_request(f"{name}: {key} must be an http(s), data: or (under --allowed-local-media-path) file:// URL",
                      param=name)


def _download(url: str, name: str, limits: ServerLimits) -> bytes:
    if not limits.allow_url_fetch:
        raise bad_request(f"{name}: this server does not fetch URLs ({url}); upload the file as input_reference, "
                          "send a data: URL, or start the server with --allow-url-fetch", param=name)
    import httpx

    chunks, size = [], 0
    try:
        with httpx.stream("GET", url, timeout=limits.fetch_timeout, follow_redirects=True) as response:
            response.raise_for_status()
            for chunk in response.iter_bytes(1 << 16):
                size += len(chunk)
                if size > limits.max_request_bytes:
                    raise ApiError(413, f"{name}: {url} is larger than the upload limit of "
                                        f"{limits.max_request_bytes} bytes")
                chunks.append(chunk)
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        raise bad_request(f"{name}: could not fetch {url} ({type(exc).__name__}: {exc})", param=name) from None
    return b"".join(chunks)


def local_media(value: str, what: str, limits: ServerLimits) -> Path:
    """A server-local file named in a request, allowed only under the configured media roots (400 otherwise)."""
    try:
        return limits.local_path(value, what)
    except (PermissionError, FileNotFoundError) as exc:
        raise value_error(str(exc), param=what) from None
