"""``VllmOmniBackend``: Cosmos3 on a vLLM-Omni server (``vllm serve <model> --omni``) over HTTP.

text2image goes to ``POST /v1/images/generations`` (JSON), every video mode to ``POST /v1/videos/sync``
(multipart), long videos optionally through jobs (``POST /v1/videos``, polling, ``GET .../content``,
``DELETE``). The returned ``Generation`` keeps the bytes the server sent, so saving copies them as they are.

Two senders, written out twice on purpose like httpx's ``Client`` and ``AsyncClient``: :class:`VllmOmniBackend`
blocks, :class:`AsyncVllmOmniBackend` awaits and runs media work (encoding a conditioning input, decoding the
answer) in a worker thread so the event loop stays free. Everything they share, with no I/O, is in
:mod:`.vllm_base` (calls, model check, answers) and :mod:`.vllm_wire` (the wire format, the retry policy).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Callable

from .. import media
from ..errors import OutputExistsError
from ..progress import progress_bar
from ..protocol import vllm_omni as proto
from ..request import GenerationRequest
from ..result import Generation
from .vllm_base import BaseVllmClient, ReadyWatch, check_content, check_job_mode, job_finished, upload_files
from .vllm_serve import ServeCommand, curl_command, serve_command
from .vllm_wire import (API_KEY_ENV, DEFAULT_URL, Call, check_form, check_mp4_reply, decode_image_reply, decode_mp4,
                        error_from_response, form_seed_fps, input_reference, parse_json, video_fields)

ProgressCallback = Callable[[int, int], None]
CHUNK = 1 << 16

__all__ = ["VllmOmniBackend", "AsyncVllmOmniBackend", "serve_command", "ServeCommand", "curl_command",
           "error_from_response", "API_KEY_ENV", "DEFAULT_URL"]


# Progress displays, shared by both senders ----------------------------------------------------------


def _bar(client: BaseVllmClient, show: Any, **kwargs: Any):
    return progress_bar(enabled=bool(client.progress if show is None else show), **kwargs)


def _show(bar: Any, n: float, text: str) -> None:
    if bar is not None:
        bar.n = min(n, bar.total) if bar.total else n
        bar.set_postfix_str(text, refresh=True)


def _close(bar: Any) -> None:
    if bar is not None:
        bar.close()


def _download_bar(client: BaseVllmClient, show: Any, path: Path, headers: Any):
    total = int(headers.get("content-length") or 0) or None
    return _bar(client, show, total=total, desc=f"download {path.name}", unit="B", unit_scale=True)


def _refuse_existing(path: Path, overwrite: bool) -> None:
    if path.exists() and not overwrite:  # checked before the work; atomic_path checks again when publishing
        raise OutputExistsError(f"{path} already exists; pass overwrite=True or choose another name.")


# =====================================================================================================
# The blocking client
# =====================================================================================================


class VllmOmniBackend(BaseVllmClient):
    """A blocking client for a vLLM-Omni server; ``generate(request)`` like every backend.

    See :class:`~cosmos_helpers.backends.vllm_base.BaseVllmClient` for the options.
    """

    @property
    def client(self):
        """The ``httpx.Client`` (made on first use)."""
        import httpx

        if self._client is None:
            self._client = httpx.Client(**self._client_options())
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> "VllmOmniBackend":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _send(self, call: Call):
        """Perform ``call`` under the retry policy; an error answer raises this package's exception."""
        import httpx

        attempt = 0
        while True:
            attempt += 1
            try:
                response = self.client.request(call.method, call.path, **call.kwargs())
            except httpx.TransportError as exc:
                wait = self.retry.after_error(call, attempt)
                if wait is None:
                    raise self._transport_error(call, exc) from exc
            else:
                wait = self.retry.after_status(call, attempt, response.status_code, response.headers)
                if wait is None:
                    self._check(call, response.status_code, response.content, response.headers)
                    return response
            time.sleep(wait)

    def _served(self, model: str | None, request: GenerationRequest | None = None) -> str:
        if self._models is None:
            self.models()
        return self._match_model(model, request)

    # the server ------------------------------------------------------------------------------------------

    def health(self) -> dict:
        """``GET /health`` (``{"status": "healthy"}``)."""
        return parse_json(self._send(self._get(proto.HEALTH, "health check", 5.0)).content) or {}

    def models(self) -> dict:
        """``GET /v1/models``; remembers the served model for the model check."""
        models = parse_json(self._send(self._get(proto.MODELS, "model list", 10.0)).content) or {}
        self._remember_models(models)
        return models

    def wait_until_ready(self, timeout: float = 1800.0, *, process: Any = None, log: Any = None,
                         interval: float | None = None, progress: bool | None = None) -> dict:
        """Poll ``/health`` until 200 (refused connections, timeouts and 503 mean "not ready yet").

        ``process`` (a ``subprocess.Popen``) makes the wait fail at once, with ``log``'s tail (a path or a
        callable), if the server exits. Then reads the served model from ``/v1/models``.
        """
        import httpx

        interval = 2.0 if interval is None else interval
        watch = ReadyWatch(self.url, timeout, process, log)
        call = self._get(proto.HEALTH, "readiness check", min(5.0, max(interval, 1.0)))
        bar = _bar(self, progress, total=int(timeout), desc=f"waiting for {self.url}", unit="s")
        try:
            while True:
                watch.check_process()
                try:
                    response = self.client.request(call.method, call.path, **call.kwargs())
                    if watch.answered(response.status_code, response.content, response.headers):
                        break
                except httpx.TransportError as exc:
                    watch.failed(exc)
                _show(bar, int(watch.elapsed), watch.state)
                watch.check_deadline()
                time.sleep(interval)
        finally:
            _close(bar)
        self.models()
        return watch.result(self.served_model)

    # generation ------------------------------------------------------------------------------------------

    def generate(self, request: GenerationRequest, *, progress: ProgressCallback | None = None) -> Generation:
        """Images through ``/v1/images/generations``, every video mode through ``/v1/videos/sync``."""
        self._check_request(request)
        if request.mode == "text2image":
            generation = self.generate_image(request)
        else:
            generation = self.generate_video(request)
        if progress is not None:
            progress(request.num_inference_steps, request.num_inference_steps)
        return generation

    def generate_image(self, request: GenerationRequest, *, response_format: str | None = None) -> Generation:
        self._check_request(request)
        call = self._image_call(request, response_format)
        served = self._served(request.model, request)
        started = time.perf_counter()
        response = self._send(call)
        decoded = decode_image_reply(response.content, response.headers.get("content-type", ""))
        return self._image_generation(request, decoded, response.headers, served, started,
                                      call.json["response_format"])

    def generate_video(self, request: GenerationRequest) -> Generation:
        self._check_request(request)
        fields = video_fields(request)
        served = self._served(request.model, request)
        upload = input_reference(request)
        started = time.perf_counter()
        response = self._send(self._video_call(fields, upload_files(upload)))
        check_mp4_reply(response.status_code, response.headers, response.content)
        return self._from_sync(response, decode_mp4(response.content), served=served, started=started,
                               request=request, seed=request.seed, fps=request.fps, upload=upload)

    def send_video_form(self, fields: dict[str, str], files: dict[str, tuple[str, bytes, str]] | None = None, *,
                        what: str = "video", model: str | None = None) -> Generation:
        """POST a hand-built multipart form to ``/v1/videos/sync`` (e.g. a transfer) and return its video.

        ``fields`` are text (every value a string; ``prompt``, ``num_frames`` and ``seed`` required), ``files``
        map ``input_reference`` / ``control_reference`` to ``(filename, bytes, mime)``. ``model``, when given,
        is checked against the server's like a request's.
        """
        files = dict(files or {})
        check_form(fields, files)
        seed, fps = form_seed_fps(fields)
        served = self._served(model)
        started = time.perf_counter()
        response = self._send(self._video_call(fields, files, what=what))
        check_mp4_reply(response.status_code, response.headers, response.content)
        return self._from_sync(response, decode_mp4(response.content), served=served, started=started, request=None,
                               seed=seed, fps=fps, provenance={"workflow": what, "form": dict(fields)})

    # jobs ------------------------------------------------------------------------------------------------

    def submit(self, request: GenerationRequest) -> dict:
        """``POST /v1/videos``: queue a job and return its record (``status`` ``queued``)."""
        self._check_request(request)
        check_job_mode(request)
        fields = video_fields(request)
        self._served(request.model, request)
        upload = input_reference(request)
        return self._job_record(self._send(self._video_call(fields, upload_files(upload), job=True)))

    def retrieve(self, job_id: str) -> dict:
        """The job record; a failed job's too (its GET answers with the failure's status)."""
        return parse_json(self._send(self._retrieve_call(job_id)).content)

    def wait(self, job_id: str, timeout: float | None = None, progress: Any = None,
             interval: float | None = None) -> dict:
        """Poll a job until it completes (``JobFailedError`` if it fails); ``progress`` may be a callable(job)."""
        interval = self.poll_interval if interval is None else interval
        timeout = self.timeout if timeout is None else timeout
        started = time.monotonic()
        bar = _bar(self, progress, total=100, desc=f"job {job_id[-8:]}", unit="%")
        try:
            while True:
                job = self.retrieve(job_id)
                _show(bar, int(job.get("progress") or 0), f"{job.get('status')}, {time.monotonic() - started:.0f} s")
                if callable(progress):
                    progress(job)
                if job_finished(job, started, timeout):
                    return job
                time.sleep(interval)
        finally:
            _close(bar)

    def download(self, job_id: str, path: str | Path, *, overwrite: bool = False,
                 progress: bool | None = None) -> Path:
        """Stream the job's MP4 to ``path`` atomically: a failed download leaves no file behind."""
        import httpx

        path = Path(path)
        _refuse_existing(path, overwrite)
        call = self._content_call(job_id)
        attempt = 0
        while True:
            attempt += 1
            try:
                with self.client.stream(call.method, call.path, **call.kwargs()) as response:
                    wait = self.retry.after_status(call, attempt, response.status_code, response.headers)
                    if wait is None:
                        if response.status_code >= 400:
                            self._check(call, response.status_code, response.read(), response.headers)
                        bar = _download_bar(self, progress, path, response.headers)
                        try:
                            with media.atomic_path(path, overwrite=overwrite) as tmp, open(tmp, "wb") as handle:
                                for chunk in response.iter_bytes(CHUNK):
                                    handle.write(chunk)
                                    _show(bar, handle.tell(), "")
                                check_content(job_id, handle.tell())
                        finally:
                            _close(bar)
                        return path
            except httpx.TransportError as exc:
                wait = self.retry.after_error(call, attempt)
                if wait is None:
                    raise self._transport_error(call, exc) from exc
            time.sleep(wait)

    def delete(self, job_id: str) -> dict:
        """``DELETE /v1/videos/{id}`` (a 409 "cancellation in progress" is retried)."""
        call = Call("DELETE", f"{proto.VIDEOS}/{job_id}", "job deletion", self._timeout(30.0))
        return parse_json(self._send(call).content)

    def list_jobs(self, limit: int = 20, order: str = "desc", after: str | None = None) -> dict:
        return parse_json(self._send(self._list_call(limit, order, after)).content)

    def generate_async_job(self, request: GenerationRequest, *, timeout: float | None = None, progress: Any = None,
                           keep: bool = False) -> Generation:
        """submit + wait (with progress) + download + delete (unless ``keep``), as one call."""
        check_job_mode(request)
        started = time.perf_counter()
        job = self.wait(self.submit(request)["id"], timeout, progress)
        content = self._send(self._content_call(job["id"])).content  # read once: kept, and decoded from
        check_content(job["id"], len(content))
        video = decode_mp4(content)
        if not keep:
            self.delete(job["id"])
        return self._from_job(content, video, job, started=started, request=request, kept=keep)


# =====================================================================================================
# The asyncio client: the same, awaitable; media work in a worker thread
# =====================================================================================================


class AsyncVllmOmniBackend(BaseVllmClient):
    """The asyncio twin of :class:`VllmOmniBackend` (same methods, ``await``-able).

    Encoding a conditioning input and decoding the server's image or MP4 run in ``asyncio.to_thread``, so a
    notebook's event loop keeps serving other tasks while a long video is decoded.
    """

    @property
    def client(self):
        """The ``httpx.AsyncClient`` (made on first use)."""
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(**self._client_options())
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> "AsyncVllmOmniBackend":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _send(self, call: Call):
        """Perform ``call`` under the retry policy; an error answer raises this package's exception."""
        import httpx

        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self.client.request(call.method, call.path, **call.kwargs())
            except httpx.TransportError as exc:
                wait = self.retry.after_error(call, attempt)
                if wait is None:
                    raise self._transport_error(call, exc) from exc
            else:
                wait = self.retry.after_status(call, attempt, response.status_code, response.headers)
                if wait is None:
                    self._check(call, response.status_code, response.content, response.headers)
                    return response
            await asyncio.sleep(wait)

    async def _served(self, model: str | None, request: GenerationRequest | None = None) -> str:
        if self._models is None:
            await self.models()
        return self._match_model(model, request)

    # the server ------------------------------------------------------------------------------------------

    async def health(self) -> dict:
        return parse_json((await self._send(self._get(proto.HEALTH, "health check", 5.0))).content) or {}

    async def models(self) -> dict:
        models = parse_json((await self._send(self._get(proto.MODELS, "model list", 10.0))).content) or {}
        self._remember_models(models)
        return models

    async def wait_until_ready(self, timeout: float = 1800.0, *, process: Any = None, log: Any = None,
                               interval: float | None = None, progress: bool | None = None) -> dict:
        import httpx

        interval = 2.0 if interval is None else interval
        watch = ReadyWatch(self.url, timeout, process, log)
        call = self._get(proto.HEALTH, "readiness check", min(5.0, max(interval, 1.0)))
        bar = _bar(self, progress, total=int(timeout), desc=f"waiting for {self.url}", unit="s")
        try:
            while True:
                watch.check_process()
                try:
                    response = await self.client.request(call.method, call.path, **call.kwargs())
                    if watch.answered(response.status_code, response.content, response.headers):
                        break
                except httpx.TransportError as exc:
                    watch.failed(exc)
                _show(bar, int(watch.elapsed), watch.state)
                watch.check_deadline()
                await asyncio.sleep(interval)
        finally:
            _close(bar)
        await self.models()
        return watch.result(self.served_model)

    # generation ------------------------------------------------------------------------------------------

    async def generate(self, request: GenerationRequest, *, progress: ProgressCallback | None = None) -> Generation:
        self._check_request(request)
        if request.mode == "text2image":
            generation = await self.generate_image(request)
        else:
            generation = await self.generate_video(request)
        if progress is not None:
            progress(request.num_inference_steps, request.num_inference_steps)
        return generation

    async def generate_image(self, request: GenerationRequest, *, response_format: str | None = None) -> Generation:
        self._check_request(request)
        call = self._image_call(request, response_format)
        served = await self._served(request.model, request)
        started = time.perf_counter()
        response = await self._send(call)
        decoded = await asyncio.to_thread(decode_image_reply, response.content,
                                          response.headers.get("content-type", ""))
        return self._image_generation(request, decoded, response.headers, served, started,
                                      call.json["response_format"])

    async def generate_video(self, request: GenerationRequest) -> Generation:
        self._check_request(request)
        fields = video_fields(request)
        served = await self._served(request.model, request)
        upload = await asyncio.to_thread(input_reference, request)
        started = time.perf_counter()
        response = await self._send(self._video_call(fields, upload_files(upload)))
        check_mp4_reply(response.status_code, response.headers, response.content)
        video = await asyncio.to_thread(decode_mp4, response.content)
        return self._from_sync(response, video, served=served, started=started, request=request, seed=request.seed,
                               fps=request.fps, upload=upload)

    async def send_video_form(self, fields: dict[str, str], files: dict[str, tuple[str, bytes, str]] | None = None,
                              *, what: str = "video", model: str | None = None) -> Generation:
        files = dict(files or {})
        check_form(fields, files)
        seed, fps = form_seed_fps(fields)
        served = await self._served(model)
        started = time.perf_counter()
        response = await self._send(self._video_call(fields, files, what=what))
        check_mp4_reply(response.status_code, response.headers, response.content)
        video = await asyncio.to_thread(decode_mp4, response.content)
        return self._from_sync(response, video, served=served, started=started, request=None, seed=seed, fps=fps,
                               provenance={"workflow": what, "form": dict(fields)})

    # jobs ------------------------------------------------------------------------------------------------

    async def submit(self, request: GenerationRequest) -> dict:
        self._check_request(request)
        check_job_mode(request)
        fields = video_fields(request)
        await self._served(request.model, request)
        upload = await asyncio.to_thread(input_reference, request)
        return self._job_record(await self._send(self._video_call(fields, upload_files(upload), job=True)))

    async def retrieve(self, job_id: str) -> dict:
        return parse_json((await self._send(self._retrieve_call(job_id))).content)

    async def wait(self, job_id: str, timeout: float | None = None, progress: Any = None,
                   interval: float | None = None) -> dict:
        interval = self.poll_interval if interval is None else interval
        timeout = self.timeout if timeout is None else timeout
        started = time.monotonic()
        bar = _bar(self, progress, total=100, desc=f"job {job_id[-8:]}", unit="%")
        try:
            while True:
                job = await self.retrieve(job_id)
                _show(bar, int(job.get("progress") or 0), f"{job.get('status')}, {time.monotonic() - started:.0f} s")
                if callable(progress):
                    progress(job)
                if job_finished(job, started, timeout):
                    return job
                await asyncio.sleep(interval)
        finally:
            _close(bar)

    async def download(self, job_id: str, path: str | Path, *, overwrite: bool = False,
                       progress: bool | None = None) -> Path:
        import httpx

        path = Path(path)
        _refuse_existing(path, overwrite)
        call = self._content_call(job_id)
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self.client.stream(call.method, call.path, **call.kwargs()) as response:
                    wait = self.retry.after_status(call, attempt, response.status_code, response.headers)
                    if wait is None:
                        if response.status_code >= 400:
                            self._check(call, response.status_code, await response.aread(), response.headers)
                        bar = _download_bar(self, progress, path, response.headers)
                        try:
                            with media.atomic_path(path, overwrite=overwrite) as tmp, open(tmp, "wb") as handle:
                                async for chunk in response.aiter_bytes(CHUNK):
                                    handle.write(chunk)
                                    _show(bar, handle.tell(), "")
                                check_content(job_id, handle.tell())
                        finally:
                            _close(bar)
                        return path
            except httpx.TransportError as exc:
                wait = self.retry.after_error(call, attempt)
                if wait is None:
                    raise self._transport_error(call, exc) from exc
            await asyncio.sleep(wait)

    async def delete(self, job_id: str) -> dict:
        call = Call("DELETE", f"{proto.VIDEOS}/{job_id}", "job deletion", self._timeout(30.0))
        return parse_json((await self._send(call)).content)

    async def list_jobs(self, limit: int = 20, order: str = "desc", after: str | None = None) -> dict:
        return parse_json((await self._send(self._list_call(limit, order, after))).content)

    async def generate_async_job(self, request: GenerationRequest, *, timeout: float | None = None,
                                 progress: Any = None, keep: bool = False) -> Generation:
        check_job_mode(request)
        started = time.perf_counter()
        job = await self.wait((await self.submit(request))["id"], timeout, progress)
        content = (await self._send(self._content_call(job["id"]))).content  # read once: kept, and decoded from
        check_content(job["id"], len(content))
        video = await asyncio.to_thread(decode_mp4, content)
        if not keep:
            await self.delete(job["id"])
        return self._from_job(content, video, job, started=started, request=request, kept=keep)
