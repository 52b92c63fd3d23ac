"""``FrameworkServeBackend``: Cosmos 3 on the Cosmos Framework's Ray Serve app (:mod:`..protocol.ray_serve`): one
framework sample per ``POST /generate`` (a request as the sample the framework backend would write for it, one
translation, not two), the answer's files under ``/outputs/``."""

from __future__ import annotations

import json
import time
from pathlib import Path, PurePosixPath
from typing import Any, Collection, Mapping
from urllib.parse import quote

import httpx
import numpy as np

from ..errors import (RequestValidationError, SampleFailedError, SampleSkippedError, ServerError, UnknownModelError,
                      ValidationError)
from ..presets import SOUND_SAMPLE_RATE
from ..protocol import framework as fw
from ..protocol import ray_serve as rs
from ..request import GenerationRequest, ResolvedRequest
from ..result import FinishedFile, Generation
from ..specs.load import Sample
from ..specs.resolve import ResolvedSample
from ..specs.runs import PlannedRun, SampleRun, check_portable
from ..step_cache import describe
from .base import ProgressCallback
from .framework_run import check_request, request_payload
from .vllm_base import HttpBackend
from .vllm_omni import Blocking
from .vllm_wire import DEFAULT_URL, decode_image, decode_mp4, error_message, parse_json

NAME = "framework-serve"
_GUARDRAILS_NOTE = ("the served setup's (models.<name>.setup.guardrails of the serve config; the framework's "
                    "latency.yaml / throughput.yaml: off)")


def deployment_name(model: str) -> str:
    """The deployment a model is served under: a hub id's framework checkpoint name (the serve configs' keys), else
    the name itself (``"tiny"`` on the stand-in)."""
    return fw.CHECKPOINTS.get(str(model), str(model))


class FrameworkServeBackend(Blocking, HttpBackend):
    """A client of the Cosmos Framework's Ray Serve app; ``generate(request)`` like every backend.

    Args:
        url: the app's root, e.g. ``http://head-node:8000`` (``serve run .../throughput.yaml`` listens on 8000).
        timeout: read timeout of a generation, in seconds (the app's own limit is 300 s per batch on the workers).
        connect_timeout: seconds to wait for a connection; retries: attempts of idempotent calls (``/models``,
            ``/info``, file downloads; a generation is sent once). transport: an ``httpx`` transport (tests, proxies).
        shared_files: the server reads this machine's files (same host or a shared filesystem), so local media
            may be sent as paths; otherwise only URLs are (the app downloads them).
        work_dir: where a request's conditioning arrays are written for the server to read (with ``shared_files``).
    """

    name = NAME
    as_written = True
    still_running = "is the Ray Serve app still running (serve status)?"
    timeout_fix = "Raise timeout=, or check the app's replicas (serve status)."

    def __init__(self, url: str = DEFAULT_URL, *, timeout: float = 1800.0, connect_timeout: float = 5.0,
                 retries: int = 3, shared_files: bool = False, work_dir: str | Path | None = None,
                 progress: bool = True, transport: Any = None) -> None:
        super().__init__(url, timeout=timeout, connect_timeout=connect_timeout, retries=retries, progress=progress,
                         transport=transport)
        self.shared_files, self._models = bool(shared_files), None
        self.work_dir = Path(work_dir or Path("outputs") / "framework_serve_inputs").expanduser().resolve()

    # the app's routes --------------------------------------------------------------------------------------

    def models(self) -> list[str]:
        """``GET /models``: the deployment names (remembered for the model check)."""
        names = parse_json(self._send(self._call(rs.MODELS, "model list", 10.0)).content)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ServerError(200, f"{rs.MODELS} did not answer a list of names", body=names)
        self._models = names
        return list(names)

    def info(self) -> dict[str, Any]:
        """``GET /info``: ``environment``, ``models``, ``output_dir`` (a stand-in adds ``standin``)."""
        answer = parse_json(self._send(self._call(rs.INFO, "server info", 10.0)).content)
        if not isinstance(answer, dict):
            raise ServerError(200, f"{rs.INFO} did not answer a JSON object", body=answer)
        return answer

    def served(self, model: str) -> str:
        name = deployment_name(model)
        models = self._models if self._models is not None else self.models()
        if name not in models:
            raise ValidationError("model", f"the Ray Serve app at {self.url} serves {models}, not {name!r} "
                                  f"(the request's model {model!r}); a server's model is never swapped silently.",
                                  f"send it to an app that serves {name!r} (a models.{name} entry of its serve "
                                  f"config), or ask for one of {models}.")
        return name

    # checks ------------------------------------------------------------------------------------------------

    def check(self, request: GenerationRequest) -> None:
        if not isinstance(request, (GenerationRequest, ResolvedRequest)):
            raise ValidationError("request", f"expected a GenerationRequest, got {type(request).__name__}.",
                                  "build one with GenerationRequest(mode=..., prompt=...), or run a framework "
                                  "sample with run_spec(sample, backend=this).")
        request = request.resolve()
        self._check_cache(request.step_cache)
        if request.precision is not None:
            raise ValidationError("precision", "the Ray Serve app loads its checkpoint (and any quantization_method) "
                                  f"as its deployment's setup says; a sample cannot ask for {request.precision!r}.",
                                  "leave precision out (the served checkpoint decides), set checkpoint_path / "
                                  "quantization_method under models.<name>.setup of the serve config, or use "
                                  "FrameworkBackend / DiffusersBackend.")
        self._check_guardrails(bool(request.guardrails), "GenerationRequest(..., guardrails=False)")
        for field in ("image", "video"):
            if getattr(request, field) is not None and not self.shared_files:
                raise self._local_media(field)
        check_request(request)  # what the framework's sample cannot say, as the framework backend refuses it

    def _check_cache(self, step_cache: Any) -> None:
        if step_cache is not None:
            raise ValidationError("step_cache", f"the framework's Ray Serve app caches steps as its deployment's "
                                  f"setup says ({rs.STEP_CACHE_DEFAULT}); a sample cannot ask for {step_cache!r}.",
                                  "leave step_cache out (--step-cache; the manifest records the server's setting), "
                                  "set diffusion_cache under models.<name>.setup of the serve config, or use "
                                  "FrameworkBackend / DiffusersBackend.")

    def _check_guardrails(self, wanted: bool, fix: str) -> None:
        if wanted:
            raise ValidationError("guardrails", f"the Ray Serve app runs the guardrails of its setup, "
                                  f"{_GUARDRAILS_NOTE}; a sample cannot turn them on.",
                                  f"{fix} accepts the server's setting (recorded in the manifest); for checked "
                                  "outputs, serve with guardrails: true in the config, or use FrameworkBackend.")

    def _local_media(self, field: str) -> ValidationError:
        return ValidationError(field, f"the Ray Serve app has no upload route: it opens local paths on its own "
                               f"filesystem (and downloads URLs), so {self.url} cannot read this machine's media.",
                               "give the input as an http(s) URL in a framework sample, or use "
                               "FrameworkServeBackend(url, shared_files=True) when the server shares this "
                               "filesystem (the same host, or a mount every node has).")

    # generation --------------------------------------------------------------------------------------------

    def generate(self, request: GenerationRequest, *, progress: ProgressCallback | None = None,
                 name: str | None = None) -> Generation:
        """``request`` as the framework backend's sample; ``progress`` is not called (the app reports no steps)."""
        self.check(request := request.resolve())
        served = self.served(request.model)
        name = name or f"{request.mode}_{request.fingerprint()[:8]}"
        payload = {**request_payload(request, name=name, image_dir=self.work_dir), "model": served}
        generation = self._run(payload, served, workflow=request.mode, request_model=request.model)
        generation.request = request
        return generation

    # framework input samples: sent as written ------------------------------------------------------------

    def check_sample(self, sample: Sample, r: ResolvedSample, given: set[str], step_cache: Any = None) -> None:
        check_portable(sample, r)
        self._check_cache(step_cache)
        self._check_guardrails(bool(r.guardrails), "--no-guardrails (run_spec(..., guardrails=False))")
        for key, value in sorted(sample.path_fields().items()):
            if not fw.is_url(value) and not self.shared_files:
                raise self._local_media(key)

    def dry_run(self, run: SampleRun, *, pending: Collection[str] = ()) -> PlannedRun:
        payload, served = self._sample_payload(run)
        return PlannedRun(run, payload=payload, extra={"deployment": served})

    def run_sample(self, run: SampleRun, *, progress: Any = True, server_paths: bool = False) -> Generation:
        r = run.resolved
        payload, served = self._sample_payload(run)
        return self._run(payload, served, workflow="transfer" if r.is_transfer else r.model_mode,
                         request_model=r.model)

    def _sample_payload(self, run: SampleRun) -> tuple[dict[str, Any], str]:
        """The sample as written, the overrides merged in as ``submit.py`` merges its ``--overrides``."""
        served = self.served(run.resolved.model)
        given = {k: v for k, v in run.overrides.items() if v is not None}
        return {**run.sample.payload(), **given, "name": run.sample.name, "model": served}, served

    def _run(self, payload: dict[str, Any], served: str, *, workflow: str, request_model: str) -> Generation:
        started = time.perf_counter()
        reply = self.send(payload)
        sent = time.perf_counter()
        files = [PurePosixPath(p) for output in reply.get("outputs") or [] for p in output.get("files") or []]
        if not files:
            raise ServerError(200, f"sample {payload.get('name')!r} succeeded without a file", body=reply)
        data = self.fetch(files[0])
        generation = _generation(files[0].suffix.lower(), data, reply, fps=payload.get("fps"))
        generation.backend, generation.model = NAME, served
        generation.timings.update(request_s=sent - started, download_s=time.perf_counter() - sent,
                                  total_s=time.perf_counter() - started)
        content = (reply.get("outputs") or [{}])[0].get("content") or {}
        generation.provenance.update(
            url=self.url, endpoint=rs.GENERATE, workflow=workflow, deployment=served, request_model=request_model,
            payload=payload, files=[str(p) for p in files], status=reply.get("status"),
            server_args=reply.get("args"), content=content, guardrails=_GUARDRAILS_NOTE,
            step_cache=describe(None, NAME))
        if "standin" in content:
            generation.provenance["standin"] = content["standin"]
        if content.get("action") is not None:
            generation.actions = np.asarray(content["action"], dtype=np.float32)
        return generation

    def send(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /generate`` with one sample; the ``SampleOutputs`` of a success, else this package's error."""
        response = self._send(self._call(rs.GENERATE, "generation", self.timeout, "POST", json=dict(payload),
                                         accept=lambda *_: True))  # every answer is read here
        status, reply = response.status_code, parse_json(response.content)
        if status == rs.UNKNOWN_MODEL_STATUS:
            raise UnknownModelError(status, f"{_detail(response)} (the app's deployments are its serve config's "
                                    "models; GET /models lists them)", models=self._safe_models(), body=reply)
        if status == 422:
            raise RequestValidationError(status, _validation_message(response), body=reply)
        if status >= 400:
            raise ServerError(status, f"{_detail(response)} (a sample that fails is an HTTP 500 when the setup's "
                              "keep_going is off, the framework's default: the app log has the traceback)", body=reply)
        if not isinstance(reply, dict) or not isinstance(reply.get("args"), dict) \
                or reply.get("status", "success") not in rs.STATUSES:
            raise ServerError(status, "the answer is not SampleOutputs (args, status, outputs)", body=reply)
        name = str(reply["args"].get("name", payload.get("name")))
        if reply.get("status") == "skip":
            raise SampleSkippedError(name, "skip", reply.get("message"))
        if reply.get("status") == "error":
            raise SampleFailedError(name, "error", reply.get("message"), stack_trace=reply.get("stack_trace"))
        return reply

    def fetch(self, path: str | PurePosixPath) -> bytes:
        """A file of an answer (relative to the app's output folder) from ``GET /outputs/<path>``."""
        return self._send(self._call(f"{rs.OUTPUTS}/{quote(str(path))}", "download", 120.0)).content

    def _safe_models(self) -> list[str]:
        try:
            return self.models()
        except Exception:  # the 404 is the error to report; an unreachable /models only loses the list
            return []


def _detail(response: httpx.Response) -> str:
    return error_message(parse_json(response.content), response.content, response.status_code)


def _validation_message(response: httpx.Response) -> str:
    """FastAPI's 422 as ``field: problem. Fix: ...`` for each problem (``loc`` is ``["body", field, ...]``)."""
    body = parse_json(response.content)
    problems = body.get("detail") if isinstance(body, dict) else None
    if not isinstance(problems, list) or not problems:
        return _detail(response)
    lines = []
    for problem in problems:
        field = ".".join(str(p) for p in (problem.get("loc") or []) if p != "body") or "body"
        fix = ("remove it (the fields are the framework's OmniSampleOverrides)" if problem.get("type") ==
               "extra_forbidden" else f"write {field} as the framework's sample model types it")
        lines.append(f"{field}: {problem.get('msg')} (got {json.dumps(problem.get('input'))[:80]}). Fix: {fix}.")
    return " ".join(lines)


def _generation(suffix: str, data: bytes, reply: Mapping[str, Any], *, fps: Any) -> Generation:
    """The fetched file as a ``Generation`` keeping its bytes, with the seed the server ran (it draws one if unset)."""
    seed = int(reply["args"].get("seed") or 0)
    if suffix == ".mp4":
        video = decode_mp4(data)
        return Generation(frames=video.frames, fps=float(video.fps or fps or 24.0), seed=seed, sound=video.sound,
                          sample_rate=int(video.sample_rate or SOUND_SAMPLE_RATE), finished=FinishedFile(".mp4", data))
    return Generation(frames=decode_image(data)[0], fps=float(fps or 24.0), seed=seed,
                      finished=FinishedFile(suffix, data))


__all__ = ["DEFAULT_URL", "FrameworkServeBackend", "NAME", "deployment_name"]
