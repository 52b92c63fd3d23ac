"""``VllmOmniBackend``: Cosmos3 on a vLLM-Omni server (``vllm serve <model> --omni``) over HTTP, and its asyncio twin:
two senders written out twice on purpose, like httpx's ``Client`` and ``AsyncClient`` (see :mod:`.vllm_base`). The
``Generation`` keeps the bytes the server sent, so saving copies them as they are."""

from __future__ import annotations

import asyncio
import itertools
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, Sequence

import httpx

from .. import media
from ..protocol import vllm_omni as proto
from ..request import GenerationRequest
from ..errors import OutputExistsError, ServerError, ValidationError
from ..result import Generation
from ..specs.runs import SampleRun
from .base import ProgressCallback
from .vllm_base import BaseVllmClient, JobWatch, ReadyWatch, check_request, progress_display
from .vllm_transfer import transfer_form
from .vllm_wire import (Call, check_form, check_mp4_reply, decode_image_reply, decode_mp4, input_reference, parse_json,
                        refuse_sync_action, upload_files, video_fields)

CHUNK = 1 << 16

__all__ = ["VllmOmniBackend", "AsyncVllmOmniBackend"]


class Blocking:
    """The blocking sender (a mixin of :class:`HttpBackend` s: this client and ``FrameworkServeBackend``)."""

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _send(self, call: Call, consume: Callable[[httpx.Response], Any] | None = None) -> Any:
        """Perform ``call`` under the retry policy; an error answer raises unless the call accepts it. ``consume`` reads
        the streamed answer (retried like any call if the connection is lost) and its result is returned."""
        for attempt in itertools.count(1):
            try:
                with self.client.stream(**call.kwargs()) as response:
                    wait = self.retry.after_status(call, attempt, response.status_code, response.headers)
                    if wait is None:
                        if consume is None or response.status_code >= 400:
                            response.read()
                        self._check(call, response)
                        return response if consume is None else consume(response)
            except httpx.TransportError as exc:
                wait = self.retry.after_error(call, attempt)
                if wait is None:
                    raise self._transport_error(call, exc) from exc
            time.sleep(wait)


class VllmOmniBackend(Blocking, BaseVllmClient):
    """A blocking client for a vLLM-Omni server (options: :class:`~.vllm_base.BaseVllmClient`)."""

    def _served(self, model: str | None, request: GenerationRequest | None = None) -> str:
        if self._models is None:
            self.models()
        return self._match_model(model, request)

    def check(self, request: GenerationRequest) -> None:
        """Also the served model and what its pipeline refuses (the model list is asked for once, and remembered)."""
        super().check(request)
        self._served(request.model, request)

    def run_sample(self, run: SampleRun, *, progress: Any = True, server_paths: bool = False) -> Generation:
        """A transfer sample as vLLM-Omni's transfer form, any other as its request."""
        r = run.resolved
        if not r.is_transfer:
            return super().run_sample(run, progress=progress, server_paths=server_paths)
        fields, files = transfer_form(r, run.given, server_paths=server_paths)
        return self.send_video_form(fields, files, what="transfer", model=r.model)

    # the server ------------------------------------------------------------------------------------------

    def health(self) -> dict:
        """``GET /health`` (``{"status": "healthy"}``)."""
        return parse_json(self._send(self._call(proto.HEALTH, "health check", 5.0)).content) or {}

    def models(self) -> dict:
        """``GET /v1/models``; remembers the served model for the model check."""
        models = parse_json(self._send(self._call(proto.MODELS, "model list", 10.0)).content) or {}
        self._remember_models(models)
        return models

    def wait_until_ready(self, timeout: float = 1800.0, *, process: Any = None, log: Any = None,
                         interval: float | None = None, progress: bool | None = None) -> dict:
        """Poll ``/health`` until 200 (refused connections, timeouts and 503 mean "not ready yet"), then read the
        served model. ``process`` (a ``Popen``) fails the wait at once, with ``log``'s tail, if the server exits."""
        watch = ReadyWatch(self, timeout, process, log, interval)
        with progress_display(self, progress, **watch.bar) as show:
            while True:
                watch.check_process()
                try:
                    if watch.answered(self.client.request(**watch.call.kwargs())):
                        break
                except httpx.TransportError as exc:
                    watch.failed(exc)
                watch.check_deadline(show)
                time.sleep(watch.interval)
        self.models()
        return watch.result(self.served_model)

    # generation ------------------------------------------------------------------------------------------

    def generate(self, request: GenerationRequest, *, progress: ProgressCallback | None = None) -> Generation:
        """Images through ``/v1/images/generations``, every video mode through ``/v1/videos/sync``; the action modes
        as an asynchronous job on ``/v1/videos`` (the predicted actions come in the job's record only)."""
        request = check_request(request)
        generation = self._route(request)(request)
        if progress is not None:
            progress(request.num_inference_steps, request.num_inference_steps)
        return generation

    def generate_image(self, request: GenerationRequest, *, response_format: str | None = None) -> Generation:
        request = check_request(request)
        call = self._image_call(request, response_format)
        served = self._served(request.model, request)
        started = time.perf_counter()
        response = self._send(call)
        return self._image_generation(request, response, decode_image_reply(response), served=served,
                                      started=started, response_format=call.json["response_format"])

    def _sync_video(self, call: Call, **how: Any) -> Generation:
        started = time.perf_counter()
        response = self._send(call)
        check_mp4_reply(response)
        return self._from_sync(response, decode_mp4(response.content), started=started, **how)

    def generate_video(self, request: GenerationRequest) -> Generation:
        request = check_request(request)
        refuse_sync_action(request)
        fields = video_fields(request)
        served = self._served(request.model, request)
        upload = input_reference(request)
        return self._sync_video(self._video_call(fields, upload_files(upload)), served=served, request=request,
                                seed=request.seed, fps=request.fps, upload=upload)

    def send_video_form(self, fields: dict[str, str], files: dict[str, tuple[str, bytes, str]] | None = None, *,
                        what: str = "video", model: str | None = None) -> Generation:
        """POST a hand-built multipart form to ``/v1/videos/sync`` (e.g. a transfer) and return its video: ``fields``
        are strings (``prompt``, ``num_frames`` and ``seed`` required), ``files`` map ``input_reference`` /
        ``control_reference`` to ``(filename, bytes, mime)``; ``model`` is checked like a request's."""
        files = dict(files or {})
        seed, fps = check_form(fields, files)
        served = self._served(model)
        return self._sync_video(self._video_call(fields, files, what=what), served=served, request=None, seed=seed,
                                fps=fps, provenance={"workflow": what, "form": dict(fields)})

    # jobs ------------------------------------------------------------------------------------------------

    def submit(self, request: GenerationRequest) -> dict:
        """``POST /v1/videos``: queue a job and return its record (``status`` ``queued``)."""
        request = check_request(request, job=True)
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
        watch = JobWatch(self, job_id, timeout, interval, progress)
        with progress_display(self, progress, **watch.bar) as show:
            while not watch.finished(job := self.retrieve(job_id), show):
                time.sleep(watch.interval)
        return job

    def download(self, job_id: str, path: str | Path, *, overwrite: bool = False,
                 progress: bool | None = None) -> Path:
        """Stream the job's MP4 to ``path`` atomically: a failed download leaves no file behind."""
        path = output_path(path, overwrite)

        def save(response: httpx.Response) -> Path:
            with saving(self, progress, job_id, path, overwrite, response) as write:
                for chunk in response.iter_bytes(CHUNK):
                    write(chunk)
            return path

        return self._send(self._content_call(job_id), save)

    def delete(self, job_id: str) -> dict:
        """``DELETE /v1/videos/{id}`` (a 409 "cancellation in progress" is retried)."""
        return parse_json(self._send(self._delete_call(job_id)).content)

    def list_jobs(self, limit: int = 20, order: str = "desc", after: str | None = None) -> dict:
        return parse_json(self._send(self._list_call(limit, order, after)).content)

    def generate_async_job(self, request: GenerationRequest, *, timeout: float | None = None, progress: Any = None,
                           keep: bool = False) -> Generation:
        """submit + wait (with progress) + download + delete (unless ``keep``), as one call."""
        started = time.perf_counter()
        request = request.resolve()
        job = self.wait(self.submit(request)["id"], timeout, progress)
        content = self._send(self._content_call(job["id"])).content  # read once: kept, and decoded from
        check_content(job["id"], len(content))
        video = decode_mp4(content)
        if not keep:
            self.delete(job["id"])
        return self._from_job(content, video, job, started=started, request=request, kept=keep)


class AsyncVllmOmniBackend(BaseVllmClient):
    """The asyncio twin of :class:`VllmOmniBackend` (same methods, ``await``-able). Media work (encoding an input,
    decoding an answer) runs in ``asyncio.to_thread``, so the event loop keeps serving while a long video decodes."""

    client_type = httpx.AsyncClient

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> "AsyncVllmOmniBackend":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _send(self, call: Call, consume: Callable[[httpx.Response], Awaitable[Any]] | None = None) -> Any:
        """Perform ``call`` under the retry policy; see :meth:`VllmOmniBackend._send`."""
        for attempt in itertools.count(1):
            try:
                async with self.client.stream(**call.kwargs()) as response:
                    wait = self.retry.after_status(call, attempt, response.status_code, response.headers)
                    if wait is None:
                        if consume is None or response.status_code >= 400:
                            await response.aread()
                        self._check(call, response)
                        return response if consume is None else await consume(response)
            except httpx.TransportError as exc:
                wait = self.retry.after_error(call, attempt)
                if wait is None:
                    raise self._transport_error(call, exc) from exc
            await asyncio.sleep(wait)

    async def _served(self, model: str | None, request: GenerationRequest | None = None) -> str:
        if self._models is None:
            await self.models()
        return self._match_model(model, request)

    def check_sample(self, sample: Any, r: Any, given: set[str], step_cache: Any = None) -> None:
        raise ValidationError("backend", "framework input samples run on a blocking backend (run_spec waits for each "
                              "output); this is the asyncio client.", "use VllmOmniBackend(url) for samples.")

    async def generate_many(self, requests: Sequence[GenerationRequest], *,  # type: ignore[override]
                            names: Sequence[str] | None = None) -> list[Generation]:
        """Every request checked, then each awaited in turn."""
        for request in requests:
            self.check(request)
        return [await self.generate(request) for request in requests]

    # the server ------------------------------------------------------------------------------------------

    async def health(self) -> dict:
        return parse_json((await self._send(self._call(proto.HEALTH, "health check", 5.0))).content) or {}

    async def models(self) -> dict:
        models = parse_json((await self._send(self._call(proto.MODELS, "model list", 10.0))).content) or {}
        self._remember_models(models)
        return models

    async def wait_until_ready(self, timeout: float = 1800.0, *, process: Any = None, log: Any = None,
                               interval: float | None = None, progress: bool | None = None) -> dict:
        watch = ReadyWatch(self, timeout, process, log, interval)
        with progress_display(self, progress, **watch.bar) as show:
            while True:
                watch.check_process()
                try:
                    if watch.answered(await self.client.request(**watch.call.kwargs())):
                        break
                except httpx.TransportError as exc:
                    watch.failed(exc)
                watch.check_deadline(show)
                await asyncio.sleep(watch.interval)
        await self.models()
        return watch.result(self.served_model)

    # generation ------------------------------------------------------------------------------------------

    async def generate(self, request: GenerationRequest, *, progress: ProgressCallback | None = None) -> Generation:
        request = check_request(request)
        generation = await self._route(request)(request)
        if progress is not None:
            progress(request.num_inference_steps, request.num_inference_steps)
        return generation

    async def generate_image(self, request: GenerationRequest, *, response_format: str | None = None) -> Generation:
        request = check_request(request)
        call = self._image_call(request, response_format)
        served = await self._served(request.model, request)
        started = time.perf_counter()
        response = await self._send(call)
        decoded = await asyncio.to_thread(decode_image_reply, response)
        return self._image_generation(request, response, decoded, served=served, started=started,
                                      response_format=call.json["response_format"])

    async def _sync_video(self, call: Call, **how: Any) -> Generation:
        started = time.perf_counter()
        response = await self._send(call)
        check_mp4_reply(response)
        video = await asyncio.to_thread(decode_mp4, response.content)
        return self._from_sync(response, video, started=started, **how)

    async def generate_video(self, request: GenerationRequest) -> Generation:
        request = check_request(request)
        refuse_sync_action(request)
        fields = video_fields(request)
        served = await self._served(request.model, request)
        upload = await asyncio.to_thread(input_reference, request)
        return await self._sync_video(self._video_call(fields, upload_files(upload)), served=served,
                                      request=request, seed=request.seed, fps=request.fps, upload=upload)

    async def send_video_form(self, fields: dict[str, str], files: dict[str, tuple[str, bytes, str]] | None = None,
                              *, what: str = "video", model: str | None = None) -> Generation:
        files = dict(files or {})
        seed, fps = check_form(fields, files)
        served = await self._served(model)
        return await self._sync_video(self._video_call(fields, files, what=what), served=served, request=None,
                                      seed=seed, fps=fps, provenance={"workflow": what, "form": dict(fields)})

    # jobs ------------------------------------------------------------------------------------------------

    async def submit(self, request: GenerationRequest) -> dict:
        request = check_request(request, job=True)
        fields = video_fields(request)
        await self._served(request.model, request)
        upload = await asyncio.to_thread(input_reference, request)
        return self._job_record(await self._send(self._video_call(fields, upload_files(upload), job=True)))

    async def retrieve(self, job_id: str) -> dict:
        return parse_json((await self._send(self._retrieve_call(job_id))).content)

    async def wait(self, job_id: str, timeout: float | None = None, progress: Any = None,
                   interval: float | None = None) -> dict:
        watch = JobWatch(self, job_id, timeout, interval, progress)
        with progress_display(self, progress, **watch.bar) as show:
            while not watch.finished(job := await self.retrieve(job_id), show):
                await asyncio.sleep(watch.interval)
        return job

    async def download(self, job_id: str, path: str | Path, *, overwrite: bool = False,
                       progress: bool | None = None) -> Path:
        path = output_path(path, overwrite)

        async def save(response: httpx.Response) -> Path:
            with saving(self, progress, job_id, path, overwrite, response) as write:
                async for chunk in response.aiter_bytes(CHUNK):
                    write(chunk)
            return path

        return await self._send(self._content_call(job_id), save)

    async def delete(self, job_id: str) -> dict:
        return parse_json((await self._send(self._delete_call(job_id))).content)

    async def list_jobs(self, limit: int = 20, order: str = "desc", after: str | None = None) -> dict:
        return parse_json((await self._send(self._list_call(limit, order, after))).content)

    async def generate_async_job(self, request: GenerationRequest, *, timeout: float | None = None,
                                 progress: Any = None, keep: bool = False) -> Generation:
        request = request.resolve()
        started = time.perf_counter()
        job = await self.wait((await self.submit(request))["id"], timeout, progress)
        content = (await self._send(self._content_call(job["id"]))).content  # read once: kept, and decoded from
        check_content(job["id"], len(content))
        video = await asyncio.to_thread(decode_mp4, content)
        if not keep:
            await self.delete(job["id"])
        return self._from_job(content, video, job, started=started, request=request, kept=keep)


def check_content(job_id: str, size: int) -> None:
    """An action-only output has no video."""
    if not size:
        raise ServerError(200, f"job {job_id} content is empty")


def output_path(path: str | Path, overwrite: bool) -> Path:
    """``path``, refused if it exists (checked before the work; ``atomic_path`` checks again when publishing)."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise OutputExistsError(f"{path} already exists; pass overwrite=True or choose another name.")
    return path


@contextmanager
def saving(client: BaseVllmClient, show: Any, job_id: str, path: Path, overwrite: bool,
           response: httpx.Response) -> Iterator[Callable[[bytes], None]]:
    """``write(chunk)`` of a job's streamed MP4: to ``path`` atomically, with a progress display; an empty one fails."""
    total = int(response.headers.get("content-length") or 0) or None
    with (progress_display(client, show, total=total, desc=f"download {path.name}", unit="B",
                           unit_scale=True) as update,
          media.atomic_path(path, overwrite=overwrite) as tmp, open(tmp, "wb") as handle):
        def write(chunk: bytes) -> None:
            handle.write(chunk)
            update(handle.tell())

        yield write
        check_content(job_id, handle.tell())
