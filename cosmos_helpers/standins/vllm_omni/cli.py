"""``cosmos-helpers serve``: the local vLLM-Omni 0.30.0 stand-in for Cosmos3 (FastAPI + uvicorn), and what a server
is configured with: the :class:`ServerLimits` (stand-in hardening with defaults for a workshop laptop serving a room
of notebooks), the binding warning and the step cache (``--cache-backend`` / ``--cache-config``, run as a
:class:`~cosmos_helpers.SeaCache` by diffusers' hooks for every request; what differs is refused at start). Both are
in the README's "Where the stand-in differs".

Like ``vllm serve`` it loads the model *before* binding the port, so while it loads connections are refused;
``Application startup complete.`` means ready. Heavy imports (torch, fastapi, uvicorn) happen in ``run``, so
``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...backends.vllm_serve import cache_config
from ...backends.vllm_wire import API_KEY_ENV
from ...errors import ValidationError
from ...presets import PROFILES, get_profile, model_for
from ...protocol import step_cache as facts
from ...protocol.vllm_omni import SYNC_TIMEOUT_S
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
    unknown = sorted(set(values) - set(_KEYS))
    if unknown:
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None,
                        help="what to serve: 'tiny' (embedded random-weight model), a hub id or a checkpoint folder "
                             "(default: the --profile's model, else tiny)")
    parser.add_argument("--profile", default=None, choices=tuple(PROFILES),
                        help="serve this profile's model (tiny, nvidia/Cosmos3-Nano, -Super, -Edge); requests get "
                             "vLLM-Omni's defaults for it either way")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (default: 8000)")
    parser.add_argument("--api-key", default=os.environ.get(API_KEY_ENV),
                        help=f"require 'Authorization: Bearer KEY' on /v1/* (default: ${API_KEY_ENV})")
    parser.add_argument("--served-model-name", default=None, help="name clients send as 'model' (default: --model)")
    parser.add_argument("--storage-dir", default=None, help="job files and uploads (default: a temporary folder)")
    parser.add_argument("--sync-timeout", type=float,
                        default=float(os.environ.get("VLLM_OMNI_VIDEO_SYNC_TIMEOUT", SYNC_TIMEOUT_S)),
                        help="seconds before /v1/videos/sync answers 504, queueing included (default: %(default)g)")
    guard = parser.add_mutually_exclusive_group()
    guard.add_argument("--guardrails", action="store_true",
                       help="run the Cosmos guardrails (needs the cosmos_guardrail package and a GPU host); a "
                            "blocked prompt gets vLLM's 400. Off by default here (vLLM-Omni: on)")
    guard.add_argument("--no-guardrails", action="store_true", help="no guardrails (the default; vLLM's flag)")
    parser.add_argument("--cache-backend", default="none", metavar="none|sea_cache",
                        help="vLLM-Omni's step cache for every request: sea_cache runs SeaCache through diffusers' "
                             "hooks (default: none, every step computed, as vLLM-Omni)")
    parser.add_argument("--cache-config", default=None, metavar="JSON",
                        help="SeaCache settings under vLLM-Omni's keys, e.g. '{\"sea_threshold\": 0.3}' "
                             "(sea_threshold, sea_residual_order 0 or 1, sea_max_consecutive_cached, sea_power_exp); "
                             "unknown keys are refused (vLLM-Omni ignores them)")
    parser.add_argument("--step-progress", action="store_true",
                        help="report per-step job progress (vLLM-Omni jumps from 0 to 100)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    group = parser.add_argument_group(
        "limits (stand-in hardening: requests over a limit are refused before any generation work)")
    defaults = ServerLimits()
    for limit in FLAGGED:
        default, unit, text = getattr(defaults, limit.name), limit.metadata["unit"], limit.metadata["help"]
        default = default / unit if unit != 1 else default
        text += "" if "(default:" in text else " (default: %(default)d)"
        group.add_argument(limit.metadata["flag"], type=type(default), default=default,
                           metavar=limit.metadata["metavar"], help=text)
    group.add_argument("--allowed-local-media-path", action="append", default=[], metavar="DIR",
                       help="a folder whose files requests may name by server-local path (control_path, file:// "
                            "references); resolved with realpath, so '..' and symlinks cannot escape; repeatable "
                            "(default: none, every local path is refused)")
    group.add_argument("--allow-url-fetch", action="store_true",
                       help="fetch http(s):// image_reference/video_reference URLs as vLLM-Omni does (default: off, "
                            "so the server cannot be used to reach other hosts)")
    parser.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))


def limits_from_args(args: argparse.Namespace) -> ServerLimits:
    values = {}
    for limit in FLAGGED:
        value, unit = getattr(args, limit.metadata["flag"][2:].replace("-", "_")), limit.metadata["unit"]
        values[limit.name] = int(value * unit) if unit != 1 else value
    return ServerLimits(**values, allowed_local_media_paths=tuple(args.allowed_local_media_path),
                        allow_url_fetch=args.allow_url_fetch)


def served_model(args: argparse.Namespace) -> str:
    """``--model``, else the ``--profile``'s model, else the default profile's; both given must agree."""
    profile_model = get_profile(args.profile).model if args.profile else None
    if args.model and profile_model and args.model != profile_model:
        raise ValidationError("--model", f"{args.model!r} is not the --profile {args.profile}'s model "
                              f"({profile_model}).", "give --model or --profile, not both.")
    return model_for(args.profile, args.model)


def run(args: argparse.Namespace, backend: Any = None) -> int:
    """Build the app for ``args`` and run it under uvicorn until stopped (``backend``: default diffusers)."""
    limits = limits_from_args(args)  # a bad value fails before anything loads
    step_cache = server_cache(args.cache_backend, args.cache_config)
    model = served_model(args)
    warning = binding_warning(args.host, args.api_key)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    started = time.perf_counter()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    import uvicorn

    from .app import create_app

    print(f"loading {model!r} ...", flush=True)
    try:  # transfer on diffusers (:mod:`.transfer`); without its optional dependencies, none
        from .transfer import make_transfer_runner
    except ImportError as exc:
        print(f"transfer disabled: {exc}", file=sys.stderr, flush=True)
        transfer_runner = None
    else:
        transfer_runner = make_transfer_runner(model=model, guardrails=args.guardrails, step_cache=step_cache)
    app = create_app(backend, api_key=args.api_key or None, served_model_name=args.served_model_name, model=model,
                     storage_dir=args.storage_dir, sync_timeout=args.sync_timeout, guardrails=args.guardrails,
                     step_progress=args.step_progress, limits=limits, step_cache=step_cache,
                     transfer_runner=transfer_runner)
    state = app.state.server
    print(f"serving {state.served_model_name!r} on http://{args.host}:{args.port} (storage {state.storage}; "
          f"guardrails {'on' if args.guardrails else 'off'}; imports took {time.perf_counter() - started:.1f} s)",
          flush=True)
    print(limits, flush=True)
    print(log_line(step_cache), flush=True)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                            timeout_graceful_shutdown=2, access_log=args.log_level == "debug")
    uvicorn.Server(config).run()
    return 0
