"""The waits of the vLLM-Omni clients, shared by the blocking and the asyncio sender: a readiness wait's and a job's
bookkeeping (deadline, last answer, outcome), and the progress displays both show while they wait or download."""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

import httpx

from ..errors import BackendUnavailableError, GenerationTimeoutError, JobFailedError
from ..progress import progress_bar
from ..protocol import vllm_omni as proto
from .vllm_wire import error_from_response, guardrail_error

if TYPE_CHECKING:
    from .vllm_base import BaseVllmClient


class ReadyWatch:
    """The bookkeeping of a readiness wait: deadline, last answer, and the server process, if we started it.

    ``call`` is the ``/health`` probe; a sender performs it every ``interval`` seconds without the retry policy
    (a refused connection, a timeout or a 503 only mean "not ready yet").
    """

    def __init__(self, client: "BaseVllmClient", timeout: float, process: Any, log: Any,
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

    def __init__(self, client: "BaseVllmClient", job_id: str, timeout: float | None, interval: float | None,
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
    """A progress display (``show`` overrides the client's setting) as ``update(n, text)``; shared by both senders."""
    bar = progress_bar(enabled=bool(client.progress if show is None else show), **kwargs)

    def update(n: float, text: str = "") -> None:
        if bar is not None:
            bar.n = min(n, bar.total) if bar.total else n
            bar.set_postfix_str(text, refresh=True)

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


def download_progress(client: BaseVllmClient, show: Any, path: Path,
                       response: httpx.Response) -> AbstractContextManager[Callable[..., None]]:
    total = int(response.headers.get("content-length") or 0) or None
    return progress_display(client, show, total=total, desc=f"download {path.name}", unit="B", unit_scale=True)
