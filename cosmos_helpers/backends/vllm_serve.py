"""Command lines around a vLLM-Omni server, for copying into a terminal: ``vllm serve ... --omni`` to start one,
``curl`` to call one (the very fields the client sends, built by the same :mod:`.vllm_wire` functions)."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..errors import ValidationError
from ..precision import check_precision, vllm_serve_flags
from ..protocol import step_cache as cache_facts
from ..protocol import vllm_omni as proto
from ..request import GenerationRequest
from ..step_cache import OFF, SeaCache, StepCache, check_for_backend, check_step_cache
from .vllm_wire import API_KEY_ENV, image_body, video_fields

DOCKER_IMAGE = "vllm/vllm-omni:cosmos3"


@dataclass
class ServeCommand:
    """A ``vllm serve ... --omni`` command line; ``argv`` to run, ``shell()`` to print, ``docker()`` to wrap."""

    argv: list[str]
    port: int
    gpus: int
    image: str = DOCKER_IMAGE
    use_docker: bool = False

    def shell(self) -> str:
        return " ".join(shlex.quote(part) for part in self.argv)

    def docker(self, image: str | None = None) -> str:
        """The same command inside the vLLM-Omni container (GPUs, shared memory, HF cache and token)."""
        wrapper = ["docker", "run", "--rm", "--gpus", "all", "--ipc=host", "-p", f"{self.port}:{self.port}",
                   "-v", "$HOME/.cache/huggingface:/root/.cache/huggingface", "-e", "HF_TOKEN",
                   image or self.image]
        return " ".join(p if p.startswith("$HOME") else shlex.quote(p) for p in wrapper) + " " + self.shell()

    def __str__(self) -> str:
        return self.docker() if self.use_docker else self.shell()


def serve_command(model: str, gpus: int = 1, *, port: int = 8000, tensor_parallel: int | None = None,
                  cfg_parallel: int | None = None, ulysses: int | None = None, layerwise_offload: bool = False,
                  init_timeout: int = 1800, api_key: str | None = None, docker: bool = False,
                  served_model_name: str | None = None, guardrails: bool = True, precision: Any = None,
                  force_cutlass_fp8: bool = False, kv_cache_fp8: bool = False,
                  step_cache: StepCache = None) -> ServeCommand:
    """The ``vllm serve <model> --omni`` command for a Cosmos3 checkpoint on ``gpus`` GPUs: with no degree given,
    tensor parallelism takes them all. ``api_key`` is printed as ``$COSMOS3_VLLM_API_KEY``, never in clear;
    ``docker=True`` makes ``str(command)`` the ``docker run`` form; ``step_cache`` is every request's."""
    if not isinstance(model, str) or not model.strip():
        raise ValidationError("model", f"expected a model id or folder, got {model!r}.", "e.g. 'nvidia/Cosmos3-Nano'.")
    precision_flags = vllm_serve_flags(check_precision(precision), force_cutlass=force_cutlass_fp8,
                                       kv_cache_fp8=kv_cache_fp8)
    degrees = {"gpus": gpus, "tensor_parallel": tensor_parallel, "cfg_parallel": cfg_parallel, "ulysses": ulysses,
               "port": port, "init_timeout": init_timeout}
    for name, value in degrees.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValidationError(name, f"expected a positive integer, got {value!r}.", f"pass e.g. {name}=1.")
    if not 1 <= port <= 65535:
        raise ValidationError("port", f"{port} is not a TCP port.", "use 1..65535, e.g. 8000.")
    if cfg_parallel not in (None, 1, 2):
        raise ValidationError("cfg_parallel", f"CFG parallelism splits the two guidance branches, so it is 1 or 2, "
                              f"got {cfg_parallel}.", "use cfg_parallel=2 (or leave it out).")
    if gpus > 1 and tensor_parallel is None and cfg_parallel is None and ulysses is None:
        tensor_parallel = gpus
    tp, cfg, sp = tensor_parallel or 1, cfg_parallel or 1, ulysses or 1
    product = tp * cfg * sp
    if product > gpus:
        culprit = next(key for key in ("tensor_parallel", "cfg_parallel", "ulysses") if degrees[key] not in (None, 1))
        raise ValidationError(culprit, f"tensor_parallel x cfg_parallel x ulysses = {tp} x {cfg} x {sp} = {product} "
                              f"GPUs per request, but only gpus={gpus} are available.",
                              f"lower {culprit} so the product is at most {gpus}, or raise gpus.")
    argv = ["vllm", "serve", model, "--omni", "--model-class-name", proto.PIPELINE_CLASS,
            "--port", str(port), "--init-timeout", str(init_timeout)]
    for flag, degree in (("--tensor-parallel-size", tp), ("--cfg-parallel-size", cfg), ("--ulysses-degree", sp)):
        if degree > 1:
            argv += [flag, str(degree)]
    if layerwise_offload:
        argv.append("--enable-layerwise-offload")
    if served_model_name:
        argv += ["--served-model-name", served_model_name]
    if not guardrails:
        argv.append("--no-guardrails")
    argv += precision_flags
    if api_key:
        argv += ["--api-key", f"${API_KEY_ENV}"]
    return ServeCommand(argv=argv + cache_flags(step_cache), port=port, gpus=gpus, use_docker=docker)


def cache_flags(step_cache: StepCache) -> list[str]:
    """``vllm serve``'s flags for a step cache, checked against what vLLM-Omni can set."""
    step_cache = check_step_cache(step_cache)
    check_for_backend(step_cache, "vllm-omni")
    if step_cache is None:
        return []
    if step_cache == OFF:
        return [cache_facts.VLLM_CACHE_BACKEND_FLAG, "none"]
    flags = [cache_facts.VLLM_CACHE_BACKEND_FLAG, cache_facts.VLLM_SEA_CACHE]
    config = cache_config(step_cache)
    return flags + ([cache_facts.VLLM_CACHE_CONFIG_FLAG, json.dumps(config, sort_keys=True)] if config else [])


def cache_config(step_cache: SeaCache) -> dict[str, Any]:
    """``--cache-config``'s object: the fields ``step_cache`` sets, under vLLM-Omni's keys (``check_for_backend``
    refused those it has none for)."""
    return {cache_facts.FIELDS[name][1]: value for name, value in step_cache.given().items()
            if cache_facts.FIELDS[name][1] is not None}


def curl_command(url: str, request: GenerationRequest, *, api_key: str | None = None, async_job: bool = False,
                 output: str | None = None, reference_path: str | None = None,
                 response_format: str = "b64_json") -> str:
    """The ``curl`` command that sends what :class:`VllmOmniBackend` sends, but an image2video image as it is (a note
    says to crop it). ``--form-string``: curl's ``-F`` would read ``;``, ``@`` and ``<`` in JSON captions."""
    request = request.resolve()
    base = url.rstrip("/")
    auth = ["-H", f"Authorization: Bearer ${API_KEY_ENV}"] if (api_key or os.environ.get(API_KEY_ENV)) else []
    if request.mode == "text2image":
        body = json.dumps(image_body(request, response_format), separators=(",", ":"))
        default = "image_response.json" if response_format == "b64_json" else "image.png"
        parts = ["curl", "-sS", "--fail-with-body", "-X", "POST", f"{base}{proto.IMAGES}",
                 "-H", "Content-Type: application/json", *auth, "-d", body, "-o", output or default]
        note = "  # the PNG is base64 in .data[0].b64_json" if response_format == "b64_json" else ""
        return _join(parts) + note
    route = proto.VIDEOS if async_job else proto.VIDEOS_SYNC
    parts = ["curl", "-sS", "--fail-with-body", "-X", "POST", f"{base}{route}", *auth]
    for name, value in video_fields(request).items():
        parts += ["--form-string", f"{name}={value}"]
    note = ""
    if request.mode in ("image2video", "video2video"):
        if reference_path is None:
            source = request.image if request.mode == "image2video" else request.video
            reference_path = str(source) if isinstance(source, (str, Path)) else (
                "input.png" if request.mode == "image2video" else "input.mp4")
        parts += ["-F", f"input_reference=@{reference_path}"]
        if request.mode == "image2video":
            note = f"  # crop the image to {request.width}:{request.height} first: the server stretches it"
    parts += ["-o", output or ("job.json" if async_job else "output.mp4")]
    return _join(parts) + note


def _join(parts: Sequence[str]) -> str:
    """Shell-quote each part, except the key reference, which the shell must expand."""
    return " ".join('"' + part + '"' if f"${API_KEY_ENV}" in part else shlex.quote(part) for part in parts)
