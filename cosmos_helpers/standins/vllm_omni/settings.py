"""What a stand-in server is configured with: the :class:`ServerLimits` (``create_app`` options and ``cosmos-helpers
serve`` flags), the binding warning and the step cache (vLLM-Omni's ``--cache-backend`` / ``--cache-config``, run as
a :class:`~cosmos_helpers.SeaCache` by diffusers' hooks for every request). The limits are stand-in hardening, with
defaults for a workshop laptop serving a room of notebooks: a request over one is refused *before* any generation
work, in vLLM's envelope (each flag's help names the status). Where both differ from vLLM-Omni is in the README
("Where the stand-in differs"); a cache setting the stand-in cannot run is refused at start, before the model loads.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...backends.vllm_serve import cache_config
from ...errors import ValidationError
from ...protocol import step_cache as facts
from ...step_cache import SeaCache, StepCache

MiB = 1024 * 1024
_KEYS = {names[1]: ours for ours, names in facts.FIELDS.items() if names[1]}  # --cache-config key -> our field
_ALIASES = ("stepcache", "step_cache_dit")  # other names vLLM-Omni's selector accepts for step_cache


def _flag(default: Any, flag: str, text: str, *, unit: int = 1, metavar: str = "N") -> Any:
    """A limit with its ``serve`` flag (in ``unit``s); "(default: N)" is added to ``text`` unless it has one."""
    kind = "default_factory" if callable(default) else "default"
    return dataclasses.field(**{kind: default}, metadata={"flag": flag, "unit": unit, "metavar": metavar,
                                                          "help": text})


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


@dataclass(frozen=True)
class ServerLimits:
    """What one request may ask of the server, and how much the server keeps (``create_app(limits=...)``)."""

    max_request_bytes: int = _flag(256 * MiB, "--max-upload-mb", "largest request body, uploads included -> 413",
                                   unit=MiB, metavar="MB")
    max_field_bytes: int = _flag(1 * MiB, "--max-field-kb", "largest text form field -> 400, and image JSON body -> "
                                 "413 (default: %(default)d, Starlette's and vLLM's)", unit=1024, metavar="KB")
    max_image_pixels: int = _flag(lambda: _env_int("VLLM_MAX_IMAGE_PIXELS", 7680 * 4320), "--max-image-pixels",
                                  "largest decoded reference image / video frame, WxH -> 400 (default: "
                                  f"$VLLM_MAX_IMAGE_PIXELS or {7680 * 4320})")
    max_video_frames: int = _flag(2000, "--max-video-frames", "most frames in a reference or control video -> 400")
    max_video_seconds: float = _flag(600.0, "--max-video-seconds", "longest reference or control video -> 400",
                                     metavar="S")
    max_prompt_chars: int = _flag(32768, "--max-prompt-chars", "longest prompt / negative prompt -> 400")
    max_output_pixels: int = _flag(7680 * 4320, "--max-output-pixels", "largest requested output WxH -> 400 "
                                   "(default: %(default)d, 7680x4320, vLLM's --max-generated-image-size)")
    max_output_frames: int = _flag(1024, "--max-output-frames", "most requested output frames (after rounding up "
                                   "to 4k+1) -> 400")
    max_json_depth: int = 32  # extra_params, image body, references
    max_queue: int = _flag(32, "--max-queue", "generations that may wait behind the running one; beyond it 429 with "
                           "Retry-After, which vLLM-Omni never sends (default: %(default)d; 0 = unbounded, as "
                           "vLLM-Omni)")
    job_ttl: float = _flag(3600.0, "--job-ttl", "seconds a finished job and its file are kept (expires_at); 0 keeps "
                           "them until DELETE", metavar="S")
    allowed_local_media_paths: tuple[str, ...] = ()  # --allowed-local-media-path (vLLM-Omni opens any path unchecked)
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
        real = Path(os.path.realpath(text))
        if not any(real.is_relative_to(root) for root in self.allowed_local_media_paths):
            raise PermissionError(f"{what}: {value!r} is outside the allowed media path(s) "
                                  f"({', '.join(self.allowed_local_media_paths)})")
        if not real.is_file():
            raise FileNotFoundError(f"{what}: {value!r} is not a file under the allowed media path")
        return real

    def __str__(self) -> str:
        roots = ", ".join(self.allowed_local_media_paths) or "none"
        return (f"limits: body {self.max_request_bytes // MiB} MiB, field {self.max_field_bytes // 1024} KiB, "
                f"prompt {self.max_prompt_chars} chars, image {self.max_image_pixels} px, video "
                f"{self.max_video_frames} frames/{self.max_video_seconds:g} s, queue {self.max_queue or 'unbounded'}, "
                f"job TTL {f'{self.job_ttl:g} s' if self.job_ttl else 'none'}, local media: {roots}")


FLAGGED = [f for f in dataclasses.fields(ServerLimits) if "flag" in f.metadata]


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


def server_cache(backend: str | None, config: str | None) -> StepCache:
    """The cache every request of this server runs (``None``: none, vLLM-Omni's default), from the two flags."""
    name = (backend or "none").strip().lower()
    if name not in (*facts.VLLM_CACHE_BACKENDS, *_ALIASES):
        raise ValidationError(facts.VLLM_CACHE_BACKEND_FLAG, f"unsupported cache backend {backend!r}.",
                              f"use {facts.VLLM_SEA_CACHE} or none (vLLM-Omni {facts.VLLM_OMNI_VERSION} also knows "
                              f"{', '.join(n for n in facts.VLLM_CACHE_BACKENDS if n not in ('none', 'sea_cache'))}).")
    if name not in ("none", facts.VLLM_SEA_CACHE):
        raise ValidationError(facts.VLLM_CACHE_BACKEND_FLAG, f"{name}: the stand-in runs SeaCache only (diffusers' "
                              "hooks), and none.", f"use --cache-backend {facts.VLLM_SEA_CACHE}, or real vLLM-Omni.")
    values = _cache_config(config)
    if name == "none":
        if values:
            raise ValidationError(facts.VLLM_CACHE_CONFIG_FLAG, "settings without a cache backend would be unused.",
                                  f"add --cache-backend {facts.VLLM_SEA_CACHE}, or drop --cache-config.")
        return None
    try:
        cache = SeaCache(**{_KEYS[key]: value for key, value in values.items()})
    except ValidationError as error:  # named by the key the flag took
        key = facts.FIELDS[error.field.rsplit(".", 1)[-1]][1]
        raise ValidationError(f"{facts.VLLM_CACHE_CONFIG_FLAG} {key}", error.problem, error.fix) from None
    runs = facts.RESIDUAL_ORDERS["diffusers"]
    if cache.residual_order is not None and cache.residual_order not in runs:
        raise ValidationError(f"{facts.VLLM_CACHE_CONFIG_FLAG} {facts.FIELDS['residual_order'][1]}",
                              f"{cache.residual_order}: the stand-in runs diffusers' SeaCache, which extrapolates with "
                              f"order {' or '.join(map(str, runs))} (vLLM-Omni takes any order).",
                              f"use {' or '.join(map(str, runs))}, or real vLLM-Omni.")
    return cache


def _cache_config(text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(facts.VLLM_CACHE_CONFIG_FLAG, f"not JSON ({exc.msg}).",
                              'pass a JSON object, e.g. \'{"sea_threshold": 0.3}\'.') from None
    if not isinstance(values, dict):
        raise ValidationError(facts.VLLM_CACHE_CONFIG_FLAG, f"expected a JSON object, got {type(values).__name__}.",
                              'pass e.g. \'{"sea_threshold": 0.3}\'.')
    if unknown := sorted(set(values) - set(_KEYS)):
        raise ValidationError(facts.VLLM_CACHE_CONFIG_FLAG, f"unknown key(s) {', '.join(unknown)} for sea_cache "
                              "(vLLM-Omni would keep and ignore them).", f"use only {', '.join(sorted(_KEYS))}.")
    return values


def describe_server(cache: StepCache) -> dict[str, Any]:
    """The setting as the server reports it: the two flags' values and every SeaCache value it runs."""
    if cache is None:
        return {"cache_backend": "none"}
    return {"cache_backend": facts.VLLM_SEA_CACHE, "cache_config": cache_config(cache),
            "values": cache.values_for("vllm-omni")}


def log_line(cache: StepCache) -> str:
    """What the server prints at start, as vLLM-Omni logs it when it enables SeaCache (seacache/backend.py)."""
    if cache is None:
        return "cache backend: none (every step computed)"
    v = cache.values_for("vllm-omni")
    return (f"SeaCache enabled (threshold={v['threshold']}, residual_order={v['residual_order']}, "
            f"max_consecutive_cached={v['max_consecutive']}, power_exp={v['power_exp']})")
