"""Resource and security limits of the local vLLM-Omni-compatible server: ``create_app(limits=ServerLimits(...))``
options and ``cosmos-helpers serve`` flags, with defaults for a workshop laptop serving a room of notebooks.

A request over a limit is refused *before* any generation work, in vLLM's envelope: 413 for the body's bytes, 400
for a form field over its cap (Starlette's answer, as on vLLM-Omni) and for everything decoded or requested, 429
with ``Retry-After`` when the queue is full (vLLM-Omni queues without bound). Nothing heavy is imported here.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

MiB = 1024 * 1024


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


@dataclass(frozen=True)
class ServerLimits:
    """What one request may ask of the server, and how much the server keeps (the ``serve`` flags' help says
    more about each)."""

    max_request_bytes: int = 256 * MiB  # the whole body, uploads included -> 413
    max_field_bytes: int = 1 * MiB  # one text form field (-> 400) and the image route's JSON body (-> 413)
    max_image_pixels: int = field(default_factory=lambda: _env_int("VLLM_MAX_IMAGE_PIXELS", 7680 * 4320))
    max_video_frames: int = 2000  # a decoded reference or control video
    max_video_seconds: float = 600.0
    max_prompt_chars: int = 32768  # prompt and negative_prompt
    max_output_pixels: int = 7680 * 4320  # vLLM's --max-generated-image-size default
    max_output_frames: int = 1024  # after rounding up to 4k+1
    max_json_depth: int = 32  # extra_params, image body, references
    max_queue: int = 32  # waiting behind the running one -> 429 (a stand-in feature); 0: unbounded, as vLLM-Omni
    job_ttl: float = 3600.0  # seconds a finished job and its file are kept (expires_at); 0: until DELETE
    # folders whose files a request may name by server-local path (control_path, file:// references; vLLM-Omni opens
    # them unchecked), resolved with realpath so that '..' and symlinks cannot step outside
    allowed_local_media_paths: tuple[str, ...] = ()
    fetch_timeout: float = 60.0  # an http(s):// reference (vLLM-Omni: 60)
    allow_url_fetch: bool = False  # off: a server reachable by others would fetch any URL it sees for them (SSRF)

    def __post_init__(self) -> None:
        roots = tuple(os.path.realpath(os.path.expanduser(str(p))) for p in self.allowed_local_media_paths)
        object.__setattr__(self, "allowed_local_media_paths", roots)
        for name in ("max_request_bytes", "max_field_bytes", "max_image_pixels", "max_video_frames",
                     "max_prompt_chars", "max_output_pixels", "max_output_frames", "max_json_depth"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)!r}")
        if self.max_queue < 0 or self.job_ttl < 0 or self.max_video_seconds <= 0:
            raise ValueError("max_queue and job_ttl must be >= 0 and max_video_seconds > 0")

    def local_path(self, value: str, what: str) -> Path:
        """``value`` (a path or ``file://`` URL) resolved inside an allowed media root, else ``PermissionError``."""
        text = value[len("file://"):] if value.startswith("file://") else value
        if not self.allowed_local_media_paths:
            raise PermissionError(f"{what}: server-local paths are not accepted by this server (start it with "
                                  "--allowed-local-media-path DIR to allow files under DIR); upload the file instead")
        if "\x00" in text:
            raise PermissionError(f"{what}: the path contains a NUL byte")
        real = os.path.realpath(text)
        for root in self.allowed_local_media_paths:
            try:
                if os.path.commonpath([real, root]) == root:
                    if not os.path.isfile(real):
                        raise FileNotFoundError(f"{what}: {value!r} is not a file under the allowed media path")
                    return Path(real)
            except ValueError:  # different drives
                continue
        raise PermissionError(f"{what}: {value!r} is outside the allowed media path(s) "
                              f"({', '.join(self.allowed_local_media_paths)})")


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def binding_warning(host: str, api_key: str | None) -> str | None:
    """The loud warning for a server reachable from other machines without an API key (else ``None``)."""
    if is_loopback(host) or api_key:
        return None
    bar = "!" * 78
    return (f"{bar}\n!! WARNING: serving on {host}, reachable from other machines, WITHOUT an API key.\n"
            "!! Anyone on the network can submit generations and read every job. Set --api-key (or\n"
            "!! $COSMOS3_VLLM_API_KEY), or bind to 127.0.0.1 (the default).\n"
            f"{bar}")
