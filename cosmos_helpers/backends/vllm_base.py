"""The shared half of the vLLM-Omni clients, with no network I/O: configuration, calls, what answers become.

:class:`BaseVllmClient` is to :class:`~cosmos_helpers.backends.vllm_omni.VllmOmniBackend` and its asyncio twin
what httpx's ``BaseClient`` is to ``Client`` and ``AsyncClient``: it builds every call (route, body, timeout),
checks the request's model against the server's, and turns answers into ``Generation`` objects that keep the
server's bytes. The waits' bookkeeping (:class:`ReadyWatch`, :func:`job_finished`) lives here too, so the two
senders only send, sleep and show progress.

What a request may ask that the real server cannot honour is refused here, before anything is sent: another
model than the served one, and what the served checkpoint's pipeline refuses (Edge: sound, video2video).
Everything else a ``GenerationRequest`` can say is honoured by vLLM-Omni 0.30.0 as asked: any size that is a
multiple of 16 (so this project's CPU tier "128" too: ``size`` is used as given, only transfer's ``resolution``
is bucketed, and the transfer helper refuses "128" there), every frame count, fps, step count, guidance,
shift and seed the request accepts (within the pydantic models' bounds), the negative prompt, and each
backend-default option (``use_system_prompt``, the templates, ``guidance_interval``, ``guardrails``, the
video2video conditioning), which travel in ``extra_params`` under keys the pipeline reads. One limit is the
server's to keep, not the client's to see: a server started with ``--no-guardrails`` cannot run guardrails
that a request turns on (guardrails.py:202), and ``/v1/models`` does not say how it was started.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .. import media
from ..errors import (BackendUnavailableError, ConnectionLostError, GenerationTimeoutError, GuardrailError,
                      JobFailedError, ServerError, ValidationError)
from ..presets import PROFILES, SOUND_SAMPLE_RATE
from ..protocol import vllm_omni as proto
from ..request import GenerationRequest
from ..result import FinishedFile, Generation
from .vllm_serve import curl_command
from .vllm_wire import (API_KEY_ENV, BACKEND_NAME, DEFAULT_URL, GUARDRAIL_MARKER, Call, Files, RetryPolicy, Upload,
                        check_response_format, error_from_response, form_parts, image_body, parse_json,
                        timings_from_headers, timings_from_image, timings_from_job)


# =====================================================================================================
# Waiting
# =====================================================================================================


class ReadyWatch:
    """The bookkeeping of a readiness wait: deadline, last answer, and the server process, if we started it."""

    def __init__(self, url: str, timeout: float, process: Any = None, log: Any = None) -> None:
        self.url, self.timeout, self.process, self.log = url, float(timeout), process, log
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

    def answered(self, status: int, content: bytes, headers: Mapping[str, str]) -> bool:
        """Whether ``/health`` said ready; a wrong key will not get better by waiting, so it raises."""
        if status in (401, 403):
            raise error_from_response(status, content, headers)
        self.state = f"HTTP {status}"
        return status == 200

    def failed(self, exc: BaseException) -> None:
        refused = "refused" in str(exc).lower() or type(exc).__name__ == "ConnectError"
        self.state = "connection refused" if refused else type(exc).__name__

    def check_deadline(self) -> None:
        if self.elapsed >= self.timeout:
            raise GenerationTimeoutError(
                f"{self.url} was not ready after {self.timeout:g} s (last answer: {self.state}). A real Cosmos3 "
                "server needs minutes to load (and longer to download); raise timeout= or check its log.")

    def result(self, served_model: str | None) -> dict[str, Any]:
        return {"status": "healthy", "served_model": served_model, "ready_after_s": self.elapsed}


def log_tail(process: Any, log: Any, lines: int = 40) -> str:
    if callable(log):
        return str(log())
    if isinstance(log, (str, Path)) and Path(log).is_file():
        return "\n".join(Path(log).read_text(errors="replace").splitlines()[-lines:])
    stream = getattr(process, "stdout", None)
    if stream is not None and hasattr(stream, "read"):
        try:
            data = stream.read()
            text = data.decode(errors="replace") if isinstance(data, bytes) else str(data)
            return "\n".join(text.splitlines()[-lines:])
        except (OSError, ValueError):  # a closed or unreadable pipe: no log to show
            pass
    return "(no log captured)"


def job_finished(job: Mapping[str, Any], started: float, timeout: float) -> bool:
    """True once a polled job completed; raises when it failed or the wait ran out; False to keep polling."""
    status = job.get("status")
    if status == "completed":
        return True
    if status == "failed":
        message = str((job.get("error") or {}).get("message", ""))
        if GUARDRAIL_MARKER in message.lower():
            raise GuardrailError(message)
        raise JobFailedError(dict(job))
    if time.monotonic() - started >= timeout:
        raise GenerationTimeoutError(f"job {job.get('id')} was still {status} after {timeout:g} s; it keeps running "
                                     "on the server. Call wait() again, or delete() it.")
    return False


# =====================================================================================================
# The shared base of both clients
# =====================================================================================================


class BaseVllmClient:
    """Configuration, call building and reply reading shared by :class:`VllmOmniBackend` and its async twin.

    Args:
        url: the server, e.g. ``http://127.0.0.1:8000``.
        api_key: sent as ``Authorization: Bearer``; default ``$COSMOS3_VLLM_API_KEY``.
        timeout: read timeout of generation calls, in seconds (the server's own sync timeout, 600 s by
            default, counts time spent queued).
        connect_timeout: seconds to wait for a connection on every call.
        poll_interval: seconds between job polls (2-5 s for a real server).
        retries: attempts of idempotent calls (health, models, polls, listing, deleting, downloads);
            generation POSTs are sent once.
        progress: progress displays for readiness waits, job polls and downloads.
        image_response_format: ``b64_json`` (default) or ``file`` for text2image.
        transport: an ``httpx`` transport (tests, proxies); default httpx's own.

    The model is not an option: it is the request's. The client checks it against ``GET /v1/models``.
    """

    name = BACKEND_NAME

    def __init__(self, url: str = DEFAULT_URL, api_key: str | None = None, *, timeout: float = 1800.0,
                 connect_timeout: float = 5.0, poll_interval: float = 2.0, retries: int = 3, progress: bool = True,
                 image_response_format: str = "b64_json", transport: Any = None, model: Any = None) -> None:
        if model is not None:
            raise ValidationError("model", f"{type(self).__name__} sends the model each request names, so it takes "
                                  "none (the server's model is checked against the request's).",
                                  f"GenerationRequest(..., profile='nano') or GenerationRequest(..., model={model!r}).")
        self.url = _check_url(url)
        self.api_key = api_key if api_key is not None else (os.environ.get(API_KEY_ENV) or None)
        for label, value in (("timeout", timeout), ("connect_timeout", connect_timeout),
                             ("poll_interval", poll_interval)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValidationError(label, f"expected a positive number of seconds, got {value!r}.",
                                      f"pass e.g. {label}=5.")
        check_response_format(image_response_format)
        self.timeout, self.connect_timeout, self.poll_interval = float(timeout), float(connect_timeout), poll_interval
        self.retry = RetryPolicy(retries)
        self.progress = bool(progress)
        self.image_response_format = image_response_format
        self.served_model: str | None = None
        self._transport = transport
        self._models: list[dict[str, Any]] | None = None
        self._client: Any = None  # the sender's httpx client, made on first use

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    @property
    def retries(self) -> int:
        return self.retry.attempts

    @property
    def headers(self) -> dict[str, str]:
        headers = {"User-Agent": "cosmos-helpers"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def curl(self, request: GenerationRequest, **kwargs: Any) -> str:
        """The equivalent ``curl`` command (the same fields this client sends; see :func:`curl_command`)."""
        kwargs.setdefault("response_format", self.image_response_format)
        return curl_command(self.url, request, api_key=self.api_key, **kwargs)

    def _client_options(self) -> dict[str, Any]:
        return {"base_url": self.url, "headers": self.headers, "timeout": self._timeout(30.0),
                "transport": self._transport}

    def _timeout(self, read: float):
        import httpx

        return httpx.Timeout(connect=self.connect_timeout, read=read, write=max(60.0, read), pool=self.connect_timeout)

    # calls ----------------------------------------------------------------------------------------------

    def _get(self, path: str, what: str, read: float = 30.0, **kwargs: Any) -> Call:
        return Call("GET", path, what, self._timeout(read), **kwargs)

    def _image_call(self, request: GenerationRequest, response_format: str | None) -> Call:
        body = image_body(request, response_format or self.image_response_format)
        return Call("POST", proto.IMAGES, "image generation", self._timeout(self.timeout), json=body)

    def _video_call(self, fields: Mapping[str, str], files: Files, *, job: bool = False, what: str = "video") -> Call:
        path, read = (proto.VIDEOS, 120.0) if job else (proto.VIDEOS_SYNC, self.timeout)
        return Call("POST", path, f"{what} {'job submission' if job else 'generation'}", self._timeout(read),
                    files=form_parts(fields, files))

    def _content_call(self, job_id: str) -> Call:
        return self._get(f"{proto.VIDEOS}/{job_id}/content", "download", 120.0)

    def _retrieve_call(self, job_id: str) -> Call:
        def failed_job(status: int, content: bytes) -> bool:  # a failed job's GET answers with its error status
            body = parse_json(content)
            return isinstance(body, dict) and body.get("id") == job_id and body.get("status") == "failed"

        return self._get(f"{proto.VIDEOS}/{job_id}", "job status", accept=failed_job)

    def _list_call(self, limit: int, order: str, after: str | None) -> Call:
        params: dict[str, Any] = {"limit": limit, "order": order}
        if after:
            params["after"] = after
        return self._get(proto.VIDEOS, "job list", params=params)

    def _check_request(self, request: GenerationRequest) -> None:
        """Refuse what is not a request; the rest is refused against the served model (module docstring)."""
        if not isinstance(request, GenerationRequest):
            raise ValidationError("request", f"expected a GenerationRequest, got {type(request).__name__}.",
                                  "build one with GenerationRequest(mode=..., prompt=...).")

    # replies --------------------------------------------------------------------------------------------

    def _check(self, call: Call, status: int, content: bytes, headers: Mapping[str, str]) -> None:
        if status >= 400 and not (call.accept is not None and call.accept(status, content)):
            raise error_from_response(status, content, headers)

    def _transport_error(self, call: Call, exc: BaseException) -> Exception:
        import httpx

        if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
            return GenerationTimeoutError(
                f"{call.what} at {self.url}{call.path} timed out ({type(exc).__name__}); the server may still be "
                "working on it. Raise timeout= or use an asynchronous job (generate_async_job).")
        return ConnectionLostError(f"lost the connection to {self.url} during {call.what} ({type(exc).__name__}: "
                                   f"{exc or 'no detail'}); is the server still running?")

    def _remember_models(self, models: Any) -> None:
        cards = models.get("data") if isinstance(models, dict) else None
        self._models = [c for c in cards or [] if isinstance(c, dict) and c.get("id")]
        self.served_model = str(self._models[0]["id"]) if self._models else None

    def _match_model(self, wanted: str | None, request: GenerationRequest | None = None) -> str:
        """The served name for a request's model; refuses (before any generation) a model the server lacks,
        and a request the served checkpoint would refuse once queued."""
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
        profiles = [p.name for p in PROFILES.values() if p.model in (served, root)]
        fix = f"GenerationRequest(..., model={served!r})"
        if profiles:
            fix = f"GenerationRequest(..., profile={profiles[0]!r}) or {fix}"
        origin = f" (from {root!r})" if root and root != served else ""
        raise ValidationError("model", f"the server at {self.url} runs {served!r}{origin}, but this request asks "
                              f"for {wanted!r}; a server's model is never swapped silently.",
                              f"use {fix}, or send the request to a server that runs {wanted!r}.")

    def _generation(self, *, frames: np.ndarray, finished: FinishedFile, served: str, started: float,
                    request: GenerationRequest | None, seed: int, fps: float, sound: np.ndarray | None = None,
                    sample_rate: int | None = None, timings: Mapping[str, float] | None = None,
                    provenance: Mapping[str, Any] | None = None) -> Generation:
        """A ``Generation`` that keeps the server's bytes as they came and its frames for previews."""
        total = time.perf_counter() - started
        generation = Generation(frames=frames, fps=fps, seed=seed, request=request, sound=sound,
                                sample_rate=int(sample_rate or SOUND_SAMPLE_RATE), backend=BACKEND_NAME,
                                model=served, finished=finished)
        generation.timings.update({"request_s": total, "total_s": total, **(timings or {})})
        generation.provenance.update({"url": self.url, "served_model": served, "seed_recorded_client_side": True,
                                      **(provenance or {})})
        return generation

    def _image_generation(self, request: GenerationRequest, decoded: tuple, headers: Mapping[str, str],
                          served: str, started: float, response_format: str) -> Generation:
        raw, frames, suffix, extra = decoded
        timings, provenance = timings_from_image(extra)
        provenance.update({"endpoint": proto.IMAGES, "response_format": response_format,
                           "server_size": extra.get("size")})
        header_timings, header_provenance = timings_from_headers(headers)
        return self._generation(frames=frames, finished=FinishedFile(suffix, data=raw), served=served,
                                started=started, request=request, seed=request.seed, fps=request.fps,
                                timings={**timings, **header_timings},
                                provenance={**provenance, **header_provenance, "served_model": served})

    def _video_generation(self, content: bytes, video: media.VideoData, *, served: str, started: float,
                          request: GenerationRequest | None, seed: int, fps: float | None,
                          timings: Mapping[str, float], provenance: Mapping[str, Any]) -> Generation:
        return self._generation(frames=video.frames, finished=FinishedFile(".mp4", data=content), served=served,
                                started=started, request=request, seed=seed, fps=float(fps or video.fps or 24.0),
                                sound=video.sound, sample_rate=video.sample_rate, timings=timings,
                                provenance={**provenance, "mp4_bytes": len(content), "served_model": served})

    def _from_sync(self, response: Any, video: media.VideoData, *, served: str, started: float,
                   request: GenerationRequest | None, seed: int, fps: float | None, upload: Upload | None = None,
                   provenance: Mapping[str, Any] | None = None) -> Generation:
        """A ``/v1/videos/sync`` answer (its MP4 already decoded) as a ``Generation``."""
        timings, header_provenance = timings_from_headers(response.headers)
        extra = {**header_provenance, "endpoint": proto.VIDEOS_SYNC, **(provenance or {})}
        if upload is not None:
            extra["input_reference"] = dict(upload.note)
        return self._video_generation(response.content, video, served=served, started=started, request=request,
                                      seed=seed, fps=fps, timings=timings, provenance=extra)

    def _from_job(self, content: bytes, video: media.VideoData, job: Mapping[str, Any], *, started: float,
                  request: GenerationRequest, kept: bool) -> Generation:
        timings, provenance = timings_from_job(job)
        served = str(job.get("model") or self.served_model or request.model)
        return self._video_generation(content, video, served=served, started=started, request=request,
                                      seed=request.seed, fps=request.fps, timings=timings,
                                      provenance={**provenance, "endpoint": proto.VIDEOS, "deleted": not kept})

    def _job_record(self, response: Any) -> dict[str, Any]:
        job = parse_json(response.content)
        if not isinstance(job, dict) or "id" not in job:
            raise ServerError(response.status_code, "the job submission answer has no id", body=job)
        return job


def check_checkpoint(request: GenerationRequest, names: set[Any]) -> None:
    """Refuse what the served checkpoint's pipeline refuses (it would, only once the request was queued)."""
    if proto.EDGE_MODEL not in names:
        return
    asked = {"sound": ("sound", "sound=True", request.sound),
             "video2video": ("mode", "mode='video2video'", request.mode == "video2video")}
    for kind in proto.EDGE_REFUSES:
        field, what, wanted = asked.get(kind, (None, None, False))
        if wanted:
            raise ValidationError(field, f"the server runs {proto.EDGE_MODEL}, whose pipeline refuses {what}.",
                                  "drop it, or send the request to a server that runs Cosmos3-Nano or -Super "
                                  "(GenerationRequest(profile='nano')).")


def check_content(job_id: str, size: int) -> None:
    """A finished job's content must not be empty (an action-only output has no video)."""
    if not size:
        raise ServerError(200, f"job {job_id} content is empty")


def check_job_mode(request: GenerationRequest) -> None:
    if request.mode == "text2image":
        raise ValidationError("mode", "asynchronous jobs make videos; text2image uses /v1/images/generations.",
                              "call generate() for images.")


def upload_files(upload: Upload | None) -> dict[str, tuple[str, bytes, str]]:
    return {} if upload is None else {"input_reference": upload.part}


def _check_url(url: Any) -> str:
    text = str(url if url is not None else DEFAULT_URL).rstrip("/")
    if not text.startswith(("http://", "https://")):
        raise ValidationError("url", f"{text!r} is not an http(s) URL.", "pass e.g. 'http://127.0.0.1:8000'.")
    if text.endswith("/v1"):
        raise ValidationError("url", f"{text!r} ends in /v1; the client adds the /v1/... routes itself.",
                              f"pass the server's root, {text[:-3]!r}.")
    return text
