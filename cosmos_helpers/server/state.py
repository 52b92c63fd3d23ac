"""What every route of one server shares: the backend, the served model, the worker, the job store and the limits
(``app.state.server``, handed to routes as the ``State`` dependency), and the two things routes do with the
worker: queue a task (429 when the queue is full) and wait for it without cancelling it."""

from __future__ import annotations

import asyncio
import math
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable

from fastapi import Depends, Request

from ..protocol.vllm_omni import SYNC_TIMEOUT_S
from .errors import ApiError
from .jobs import JobStore
from .limits import ServerLimits
from .references import Uploads
from .worker import QueueFull, SerialWorker, TaskContext

# ``(form_fields, extra_params, rgb_video_path, control_paths) -> Generation``: runs a transfer request.
TransferRunner = Callable[[dict, dict, "Path | None", "dict[str, Path]"], Any]


@dataclass
class ServerState:
    backend: Any
    model: str  # what the backend loads (``--model``)
    served_model_name: str  # what clients may send as ``model``
    jobs: JobStore
    worker: SerialWorker
    limits: ServerLimits
    guardrails: bool = False
    sync_timeout: float = SYNC_TIMEOUT_S
    step_progress: bool = False
    transfer_runner: TransferRunner | None = None
    warmup: bool = True
    started_at: float = field(default_factory=time.time)

    @property
    def storage(self) -> Path:
        return self.jobs.storage_dir

    @property
    def upload_dir(self) -> Path:
        return self.storage / "uploads"

    def busy(self, waiting: int | None = None, retry_after: float | None = None) -> ApiError:
        waiting = self.worker.waiting if waiting is None else waiting
        seconds = math.ceil(self.worker.retry_after() if retry_after is None else retry_after)
        return ApiError(429, f"Server busy: {waiting} generations are already queued (limit {self.limits.max_queue})."
                             f" Retry after {seconds} s.", headers={"Retry-After": str(seconds)})

    def submit(self, key: str, task: Callable[[TaskContext], Any], *, cleanup: Uploads | None = None,
               on_progress: Callable[[int, int], None] | None = None) -> Future:
        """Queue ``task``; a full queue is a 429 and the request's uploads are removed."""
        try:
            return self.worker.submit(key, task, on_progress=on_progress)
        except QueueFull as full:
            if cleanup is not None:
                cleanup.discard()
            raise self.busy(full.waiting, full.retry_after) from None

    def expires(self, now: float) -> int | None:
        return int(now + self.limits.job_ttl) if self.limits.job_ttl else None

    def sweep(self) -> list[str]:
        return self.jobs.sweep(self.limits.job_ttl)


def server_state(request: Request) -> ServerState:
    return request.app.state.server


State = Annotated[ServerState, Depends(server_state)]


async def wait(future: Future, timeout: float, what: str, total: float) -> Any:
    """The task's result within ``timeout`` (a 504 names the ``total`` allowed); a client giving up or a 504
    never stops work already running, as on vLLM-Omni."""
    try:
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout=max(timeout, 0.001))
    except asyncio.TimeoutError:
        raise ApiError(504, f"{what} timed out after {float(total)}s.") from None
