"""The shared half of the vLLM-Omni clients (as httpx's ``BaseClient`` is to ``Client`` and ``AsyncClient``), with no
network I/O. A server started with ``--no-guardrails`` cannot run guardrails a request turns on (guardrails.py:202),
and ``/v1/models`` cannot tell, so that one is not refused here."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Mapping

import httpx
import numpy as np

from .. import media
from ..errors import (BackendUnavailableError, ConnectionLostError, GenerationTimeoutError, JobFailedError,
                      ServerError, ValidationError)
from ..limits import check_backend_mode
from ..presets import PROFILES, SOUND_SAMPLE_RATE
from ..progress import progress_bar
from ..protocol import action
from ..protocol import vllm_omni as proto
from ..precision import check_for_backend as check_precision_for
from ..request import GenerationRequest, ResolvedRequest
from ..result import FinishedFile, Generation
from ..standins import MODEL_CARD_KEY
from ..specs.resolve import ResolvedSample
from ..specs.runs import SampleSupport
from ..step_cache import describe
from .base import Backend
from .vllm_serve import curl_command
from .vllm_transfer import check_transfer
from .vllm_wire import (API_KEY_ENV, BACKEND_NAME, DEFAULT_URL, Call, Files, RetryPolicy, Upload, check_action,
                        check_response_format, error_from_response, form_parts, guardrail_error, image_body,
                        parse_json, refuse_request_cache, server_metrics, timings_from_headers, timings_from_job,
                        video_fields)


def check_seconds(**values: Any) -> None:
    for label, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValidationError(label, f"expected a positive number of seconds, got {value!r}.",
                                  f"pass e.g. {label}=5.")


class HttpBackend(Backend):
    """What every HTTP client here holds (the vLLM-Omni clients, the framework's Ray Serve client): the URL, a
    timeout on every call, one retry policy, and the words a failed exchange is reported in."""

    remote = True
    client_type: ClassVar[type] = httpx.Client  # the asyncio client's is httpx.AsyncClient
    still_running = "is the server still running?"
    timeout_fix = "Raise timeout= or use an asynchronous job (generate_async_job)."

    def __init__(self, url: Any, *, timeout: float, connect_timeout: float, retries: int, progress: bool,
                 transport: Any, api_key: str | None = None) -> None:
        text = str(url if url is not None else DEFAULT_URL).rstrip("/")
        if not text.startswith(("http://", "https://")):
            raise ValidationError("url", f"{text!r} is not an http(s) URL.", "pass e.g. 'http://127.0.0.1:8000'.")
        check_seconds(timeout=timeout, connect_timeout=connect_timeout)
        self.url, self.api_key, self.progress = text, api_key, bool(progress)
        self.timeout, self.connect_timeout, self.retry = float(timeout), float(connect_timeout), RetryPolicy(retries)
        self._transport, self._client = transport, None  # the sender's httpx client, made on first use

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    @property
    def retries(self) -> int:
        return self.retry.attempts

    @property
    def client(self) -> Any:
        if self._client is None:
            auth = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = self.client_type(base_url=self.url, headers={"User-Agent": "cosmos-helpers", **auth},
                                            timeout=self._timeout(30.0), transport=self._transport)
        return self._client

    def _timeout(self, read: float) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect_timeout, read=read, write=max(60.0, read), pool=self.connect_timeout)

    def _call(self, path: str, what: str, read: float = 30.0, method: str = "GET", **kwargs: Any) -> Call:
        return Call(method, path, what, self._timeout(read), **kwargs)

    def _check(self, call: Call, response: httpx.Response) -> None:
        status = response.status_code
        if status >= 400 and not (call.accept is not None and call.accept(status, response.content)):
            raise error_from_response(status, response.content, response.headers)

    def _transport_error(self, call: Call, exc: BaseException) -> Exception:
        if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
            return GenerationTimeoutError(
                f"{call.what} at {self.url}{call.path} timed out after {call.timeout.read:g} s ({type(exc).__name__});"
                f" the server may still be working on it. {self.timeout_fix}")
        return ConnectionLostError(f"lost the connection to {self.url} during {call.what} ({type(exc).__name__}: "
                                   f"{exc or 'no detail'}); {self.still_running}")


class BaseVllmClient(HttpBackend):
    """Configuration, call building and reply reading shared by :class:`VllmOmniBackend` and its async twin.

    Args:
        url: the server, e.g. ``http://127.0.0.1:8000``. api_key: sent as ``Authorization: Bearer``; default
            ``$COSMOS3_VLLM_API_KEY``.
        timeout: read timeout of generation calls, in seconds (the server's own sync timeout, 600 s by default,
            counts time spent queued). connect_timeout: seconds to wait for a connection on every call.
        poll_interval: seconds between job polls (2-5 s for a real server).
        retries: attempts of idempotent calls (health, models, polls, listing, deleting, downloads); generation
            POSTs are sent once. progress: progress displays for readiness waits, job polls and downloads.
        image_response_format: ``b64_json`` (default) or ``file`` for text2image. transport: an ``httpx``
            transport (tests, proxies); default httpx's own.

    The model is not an option: it is the request's. The client checks it against ``GET /v1/models``.
    """

    name = BACKEND_NAME
    sample_support = SampleSupport(transfer=True, action_domains=action.VLLM_DOMAIN_ID, view_point=False,
                                   encodes_itself=True)

    def __init__(self, url: str = DEFAULT_URL, api_key: str | None = None, *, timeout: float = 1800.0,
                 connect_timeout: float = 5.0, poll_interval: float = 2.0, retries: int = 3, progress: bool = True,
                 image_response_format: str = "b64_json", transport: Any = None, model: Any = None) -> None:
        if model is not None:
            raise ValidationError("model", f"{type(self).__name__} sends the model each request names, so it takes "
                                  "none (the server's model is checked against the request's).",
                                  f"GenerationRequest(..., profile='nano') or GenerationRequest(..., model={model!r}).")
        super().__init__(url, timeout=timeout, connect_timeout=connect_timeout, retries=retries, progress=progress,
                         transport=transport,
                         api_key=api_key if api_key is not None else (os.environ.get(API_KEY_ENV) or None))
        if self.url.endswith("/v1"):
            raise ValidationError("url", f"{self.url!r} ends in /v1; the client adds the /v1/... routes itself.",
                                  f"pass the server's root, {self.url[:-3]!r}.")
        check_seconds(poll_interval=poll_interval)
        check_response_format(image_response_format)
        self.poll_interval, self.image_response_format = poll_interval, image_response_format
        self.served_model: str | None = None
        self.standin: dict[str, Any] | None = None  # what a stand-in server says it is (its /v1/models card)
        self._models: list[dict[str, Any]] | None = None

    # what a request or a sample may ask ------------------------------------------------------------------

    def check(self, request: GenerationRequest) -> None:
        """What is refused without asking the server (the blocking client then checks the served model too)."""
        check_request(request)
        if request.mode == "text2image":
            image_body(request, self.image_response_format)
        else:
            video_fields(request)

    def check_sample(self, sample: Any, r: ResolvedSample, given: set[str], step_cache: Any = None) -> None:
        """A step cache is the server's, chosen when it starts."""
        super().check_sample(sample, r, given)
        refuse_request_cache(step_cache)

    def localize(self, r: ResolvedSample, given: set[str], *, progress: Any = True,
                 server_paths: bool = False) -> ResolvedSample:
        """A transfer's form is checked against its fetched inputs before any control is computed for it."""
        r = super().localize(r, given, progress=progress, server_paths=server_paths)
        if r.is_transfer:
            check_transfer(r, given, server_paths=server_paths)
        return r

    def curl(self, request: GenerationRequest, **kwargs: Any) -> str:
        """The ``curl`` command that sends what this client sends (:func:`curl_command`)."""
        kwargs.setdefault("response_format", self.image_response_format)
        return curl_command(self.url, request, api_key=self.api_key, **kwargs)

    def _route(self, request: ResolvedRequest) -> Any:
        """The method that runs a request: a job for an action mode (its actions come in the job record only)."""
        if request.is_action:
            return self.generate_async_job
        return self.generate_image if request.mode == "text2image" else self.generate_video

    def _image_call(self, request: GenerationRequest, response_format: str | None) -> Call:
        body = image_body(request, response_format or self.image_response_format)
        return Call("POST", proto.IMAGES, "image generation", self._timeout(self.timeout), json=body)

    def _video_call(self, fields: Mapping[str, str], files: Files, *, job: bool = False, what: str = "video") -> Call:
        path, read = (proto.VIDEOS, 120.0) if job else (proto.VIDEOS_SYNC, self.timeout)
        return Call("POST", path, f"{what} {'job submission' if job else 'generation'}", self._timeout(read),
                    files=form_parts(fields, files))

    def _content_call(self, job_id: str) -> Call:
        return self._call(f"{proto.VIDEOS}/{job_id}/content", "download", 120.0)

    def _retrieve_call(self, job_id: str) -> Call:
        def failed_job(status: int, content: bytes) -> bool:  # a failed job's GET answers with its error status
            body = parse_json(content)
            return isinstance(body, dict) and body.get("id") == job_id and body.get("status") == "failed"

        return self._call(f"{proto.VIDEOS}/{job_id}", "job status", accept=failed_job)

    def _delete_call(self, job_id: str) -> Call:
        return self._call(f"{proto.VIDEOS}/{job_id}", "job deletion", method="DELETE")

    def _list_call(self, limit: int, order: str, after: str | None) -> Call:
        params = {"limit": limit, "order": order, **({"after": after} if after else {})}
        return self._call(proto.VIDEOS, "job list", params=params)

    # replies --------------------------------------------------------------------------------------------

    def _remember_models(self, models: Any) -> None:
        cards = models.get("data") if isinstance(models, dict) else None
        self._models = [c for c in cards or [] if isinstance(c, dict) and c.get("id")]
        self.served_model = str(self._models[0]["id"]) if self._models else None
        record = self._models[0].get(MODEL_CARD_KEY) if self._models else None
        self.standin = dict(record) if isinstance(record, Mapping) else None

    def _match_model(self, wanted: str | None, request: GenerationRequest | None = None) -> str:
        """The served name for a request's model; refuses a model the server lacks, and a request the served
        checkpoint would refuse once queued."""
        cards = self._models or []
        if not cards:
            raise ValidationError("model", f"{self.url}{proto.MODELS} lists no model, so the request's model "
                                  "cannot be checked.", "check that the URL is a vLLM-Omni server that has loaded.")
        if wanted is None:
            return str(cards[0]["id"])
        for card in cards:
            if wanted in (card.get("id"), card.get("root")):
                if request is not None:
                    check_checkpoint(request, {wanted, card.get("id"), card.get("root")})
                return str(card["id"])
        served, root = cards[0]["id"], cards[0].get("root")
        profile = next((p.name for p in PROFILES.values() if p.model in (served, root)), None)
        fix = f"GenerationRequest(..., model={served!r})"
        fix = f"GenerationRequest(..., profile={profile!r}) or {fix}" if profile else fix
        origin = f" (from {root!r})" if root and root != served else ""
        raise ValidationError("model", f"the server at {self.url} runs {served!r}{origin}, but this request asks "
                              f"for {wanted!r}; a server's model is never swapped silently.",
                              f"use {fix}, or send the request to a server that runs {wanted!r}.")

    def _generation(self, data: bytes, suffix: str, frames: np.ndarray, *, served: str, started: float,
                    request: GenerationRequest | None, seed: int, fps: float | None, timings: Mapping[str, float],
                    provenance: Mapping[str, Any], video: media.VideoData | None = None) -> Generation:
        """A ``Generation`` that keeps the server's bytes as they came; frames (and sound) are for previews."""
        total = time.perf_counter() - started
        if video is not None:
            fps, provenance = float(fps or video.fps or 24.0), {**provenance, "mp4_bytes": len(data)}
        generation = Generation(frames=frames, fps=fps, seed=seed, request=request, backend=BACKEND_NAME, model=served,
                                standin=dict(self.standin) if self.standin else None,
                                finished=FinishedFile(suffix, data=data), sound=video.sound if video else None,
                                sample_rate=int((video and video.sample_rate) or SOUND_SAMPLE_RATE))
        generation.timings.update({"request_s": total, "total_s": total, **timings})
        server = (self.standin or {}).get("step_cache")  # only a stand-in says what its server caches
        cache = {**describe(None, BACKEND_NAME), **({"server": server} if server else {})}
        generation.provenance.update({"url": self.url, "seed_recorded_client_side": True, **provenance,
                                      "served_model": served, "step_cache": cache})  # the name checked, not an answer's
        return generation

    def _image_generation(self, request: GenerationRequest, response: httpx.Response, decoded: tuple, *,
                          served: str, started: float, response_format: str) -> Generation:
        raw, frames, suffix, answer = decoded
        timings, provenance = server_metrics(answer.get("metrics"))
        header_timings, header_provenance = timings_from_headers(response.headers)
        return self._generation(raw, suffix, frames, served=served, started=started, request=request,
                                seed=request.seed, fps=request.fps, timings={**timings, **header_timings},
                                provenance={**provenance, **header_provenance, "endpoint": proto.IMAGES,
                                            "response_format": response_format, "server_size": answer.get("size")})

    def _from_sync(self, response: httpx.Response, video: media.VideoData, *, served: str, started: float,
                   request: GenerationRequest | None, seed: int, fps: float | None, upload: Upload | None = None,
                   provenance: Mapping[str, Any] | None = None) -> Generation:
        timings, header_provenance = timings_from_headers(response.headers)
        extra = {**header_provenance, "endpoint": proto.VIDEOS_SYNC, **(provenance or {})}
        if upload is not None:
            extra["input_reference"] = dict(upload.note)
        return self._generation(response.content, ".mp4", video.frames, served=served, started=started,
                                request=request, seed=seed, fps=fps, timings=timings, provenance=extra, video=video)

    def _from_job(self, content: bytes, video: media.VideoData, job: Mapping[str, Any], *, started: float,
                  request: GenerationRequest, kept: bool) -> Generation:
        timings, provenance = timings_from_job(job)
        served = str(job.get("model") or self.served_model or request.model)
        generation = self._generation(content, ".mp4", video.frames, served=served, started=started,
                                      request=request, seed=request.seed, fps=request.fps, timings=timings,
                                      video=video, provenance={**provenance, "endpoint": proto.VIDEOS,
                                                               "deleted": not kept})
        generation.actions = job_actions(job, request)
        return generation

    def _job_record(self, response: httpx.Response) -> dict[str, Any]:
        job = parse_json(response.content)
        if not isinstance(job, dict) or "id" not in job:
            raise ServerError(response.status_code, "the job submission answer has no id", body=job)
        return job


def check_request(request: Any, *, job: bool = False) -> ResolvedRequest:
    """The resolved request to send; refuses what vLLM-Omni cannot take whatever model it serves."""
    if not isinstance(request, (GenerationRequest, ResolvedRequest)):
        raise ValidationError("request", f"expected a GenerationRequest, got {type(request).__name__}.",
                              "build one with GenerationRequest(mode=..., prompt=...).")
    request = request.resolve()
    check_backend_mode(request, BACKEND_NAME)
    check_precision_for(request.precision, BACKEND_NAME)  # chosen when the server starts (serve_command)
    refuse_request_cache(request.step_cache)
    if job and request.mode == "text2image":
        raise ValidationError("mode", f"asynchronous jobs make videos; text2image uses {proto.IMAGES}.",
                              "call generate() for images.")
    check_action(request)
    return request


def check_checkpoint(request: GenerationRequest, names: set[Any]) -> None:
    """Refuse what the served checkpoint's pipeline refuses (it would, only once the request was queued)."""
    distilled = next((p for p in PROFILES.values() if p.distilled and p.model in names), None)
    if distilled is not None and not PROFILES[request.profile].distilled:
        raise ValidationError("profile", f"the server runs the distilled {distilled.model}, which would silently "
                              f"override this request's guidance {request.guidance_scale:g} and "
                              f"{request.num_inference_steps} steps with its fixed schedule.",
                              f"use GenerationRequest(..., profile={distilled.name!r}).")
    if proto.EDGE_MODEL not in names:
        return
    asked = {"sound": ("sound", "sound=True", request.sound),
             "video2video": ("mode", "mode='video2video'", request.mode == "video2video")}
    for field, what, wanted in (asked[kind] for kind in proto.EDGE_REFUSES if kind in asked):
        if wanted:
            raise ValidationError(field, f"the server runs {proto.EDGE_MODEL}, whose pipeline refuses {what}.",
                                  "drop it, or send the request to a server that runs Cosmos3-Nano or -Super "
                                  "(GenerationRequest(profile='nano')).")


def job_actions(job: Mapping[str, Any], request: GenerationRequest) -> np.ndarray | None:
    """The ``(chunk, D)`` trajectory a finished inverse-dynamics or policy job predicted: its record's ``action``
    (``VideoAction``, serving_video.py:876-893)."""
    if not request.is_action or request.mode not in action.PREDICTS_ACTIONS:
        return None
    answer = job.get("action")
    if not isinstance(answer, Mapping) or answer.get("data") is None:
        raise ServerError(200, f"job {job.get('id')} finished without the predicted actions of {request.mode}",
                          body=dict(job))
    width = action.RAW_DIM[request.embodiment]
    data = np.asarray(answer["data"], dtype=np.float32)
    if data.size != (request.num_frames - 1) * width:
        raise ServerError(200, f"job {job.get('id')} returned actions of shape {list(data.shape)}; expected "
                          f"{request.num_frames - 1} steps of {width}", body=dict(job))
    return data.reshape(request.num_frames - 1, width)


class ReadyWatch:
    """A readiness wait's deadline, last answer and server process (if we started it). A sender performs ``call``
    every ``interval`` s without the retry policy: a refusal, a timeout or a 503 mean "not yet"."""

    def __init__(self, client: BaseVllmClient, timeout: float, process: Any, log: Any,
                 interval: float | None) -> None:
        self.url, self.timeout, self.process, self.log = client.url, float(timeout), process, log
        self.interval = 2.0 if interval is None else interval
        self.call = client._call(proto.HEALTH, "readiness check", min(5.0, max(self.interval, 1.0)))
        self.bar = {"total": int(timeout), "desc": f"waiting for {self.url}", "unit": "s"}
        self.start = time.monotonic()
        self.state = "not started"

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def check_process(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise BackendUnavailableError(
                f"the server process exited with code {self.process.returncode} before it became ready. "
                f"Last log lines:\n{log_tail(self.process, self.log)}")

    def answered(self, response: httpx.Response) -> bool:
        """Whether ``/health`` said ready; a wrong key will not get better by waiting, so it raises."""
        if response.status_code in (401, 403):
            raise error_from_response(response.status_code, response.content, response.headers)
        self.state = f"HTTP {response.status_code}"
        return response.status_code == 200

    def failed(self, exc: BaseException) -> None:
        refused = "refused" in str(exc).lower() or isinstance(exc, httpx.ConnectError)
        self.state = "connection refused" if refused else type(exc).__name__

    def check_deadline(self, show: Callable[[float, str], None]) -> None:
        show(int(self.elapsed), self.state)
        if self.elapsed >= self.timeout:
            raise GenerationTimeoutError(
                f"{self.url} was not ready after {self.timeout:g} s (last answer: {self.state}). A real Cosmos3 "
                "server needs minutes to load (and longer to download); raise timeout= or check its log.")

    def result(self, served_model: str | None) -> dict[str, Any]:
        return {"status": "healthy", "served_model": served_model, "ready_after_s": self.elapsed}


def log_tail(process: Any, log: Any, lines: int = 40) -> str:
    """The server's last log lines: ``log()``, the file ``log``, else what the process wrote to its pipe."""
    if callable(log):
        return str(log())
    try:
        if isinstance(log, (str, Path)) and Path(log).is_file():
            text = Path(log).read_text(errors="replace")
        else:
            data = process.stdout.read()
            text = data.decode(errors="replace") if isinstance(data, bytes) else str(data)
    except (AttributeError, OSError, ValueError):  # no pipe, or a closed one: no log to show
        return "(no log captured)"
    return "\n".join(text.splitlines()[-lines:])


class JobWatch:
    """The bookkeeping of a job's polls: deadline, progress shown (``progress`` may be a callable(job)), outcome."""

    def __init__(self, client: BaseVllmClient, job_id: str, timeout: float | None, interval: float | None,
                 progress: Any) -> None:
        self.timeout = client.timeout if timeout is None else timeout
        self.interval = client.poll_interval if interval is None else interval
        self.progress = progress
        self.bar = {"total": 100, "desc": f"job {job_id[-8:]}", "unit": "%"}
        self.start = time.monotonic()

    def finished(self, job: Mapping[str, Any], show: Callable[[float, str], None]) -> bool:
        """True once the job completed; raises when it failed or the wait ran out; False to keep polling."""
        status, elapsed = job.get("status"), time.monotonic() - self.start
        show(int(job.get("progress") or 0), f"{status}, {elapsed:.0f} s")
        if callable(self.progress):
            self.progress(job)
        if status == "completed":
            return True
        if status == "failed":
            raise guardrail_error(str((job.get("error") or {}).get("message", ""))) or JobFailedError(dict(job))
        if elapsed >= self.timeout:
            raise GenerationTimeoutError(f"job {job.get('id')} was still {status} after {self.timeout:g} s; it keeps "
                                         "running on the server. Call wait() again, or delete() it.")
        return False


@contextmanager
def progress_display(client: BaseVllmClient, show: Any, **kwargs: Any) -> Iterator[Callable[..., None]]:
    """A progress display as ``update(n, text)`` (``show`` overrides the client's setting)."""
    with progress_bar(enabled=bool(client.progress if show is None else show), **kwargs) as bar:
        def update(n: float, text: str = "") -> None:
            bar.n = min(n, bar.total) if bar.total else n
            bar.set_postfix_str(text, refresh=True)

        yield update
