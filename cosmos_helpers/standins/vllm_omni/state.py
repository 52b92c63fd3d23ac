"""What every route of one stand-in server shares (``app.state.server``; the routes' ``State`` dependency)."""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable

from fastapi import Depends, Request

from ...protocol.vllm_omni import SYNC_TIMEOUT_S, VERSION
from .cache import describe_server
from .errors import ApiError
from .jobs import JobStore
from .limits import ServerLimits
from .references import TransferRunner, Uploads
from .worker import SerialWorker, TaskContext


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
    step_cache: Any = None  # the server's --cache-backend / --cache-config, given to every request
    started_at: float = field(default_factory=time.time)

    @property
    def storage(self) -> Path:
        return self.jobs.storage_dir

    def standin_record(self) -> dict[str, Any]:
        """What this server is and runs, in its ``/v1/models`` card (the client records it in every manifest)."""
        return {"of": "vllm-omni", "version": VERSION, "program": __package__, "model_run": self.model,
                "step_cache": describe_server(self.step_cache)}

    @property
    def upload_dir(self) -> Path:
        return self.storage / "uploads"

    def submit(self, key: str, task: Callable[[TaskContext], Any], cleanup: Uploads | None = None) -> Future:
        """Queue ``task``; a full queue is a 429 and ``cleanup``'s uploads are removed."""
        try:
            return self.worker.submit(key, task)
        except ApiError:
            if cleanup is not None:
                cleanup.discard()
            raise


def server_state(request: Request) -> ServerState:
    return request.app.state.server


State = Annotated[ServerState, Depends(server_state)]
