"""One exception hierarchy, so a notebook can catch "anything from cosmos_helpers" or one precise failure.

Every message says what went wrong *and* what to change: these errors are read by people in notebooks.
"""

from __future__ import annotations

from typing import Any


class CosmosHelpersError(Exception):
    """Base class of every error this package raises on purpose."""


class ValidationError(CosmosHelpersError, ValueError):
    """Bad input, caught before any model is loaded or any request is sent: ``field`` names the offending argument
    and ``fix`` says what to do instead."""

    def __init__(self, field: str, problem: str, fix: str | None = None) -> None:
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"{field}: {problem}" + (f" Fix: {fix}" if fix else ""))


class OutputExistsError(CosmosHelpersError, FileExistsError):
    """An output file is already there and was produced by something else; we never overwrite silently."""


class BackendUnavailableError(CosmosHelpersError, RuntimeError):
    """A backend cannot run here (missing package, no GPU, no checkout); the message says how to get it."""


class GuardrailError(CosmosHelpersError):
    """The Cosmos guardrails blocked the prompt or the output."""


class ServerError(CosmosHelpersError):
    """An HTTP server answered with an error; carries the status and the server's own message."""

    def __init__(self, status: int, message: str, *, body: Any = None, request_id: str | None = None) -> None:
        self.status, self.server_message, self.body, self.request_id = status, message, body, request_id
        super().__init__(f"HTTP {status}: {message}")


class RequestValidationError(ServerError, ValueError):
    """The server rejected the request as invalid (HTTP 400)."""


class AuthenticationError(ServerError):
    """Missing or wrong API key (HTTP 401/403)."""


class ServerBusyError(ServerError):
    """The server's queue is full (HTTP 429); ``retry_after`` says when to try again."""

    def __init__(self, status: int, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        self.retry_after = retry_after
        super().__init__(status, message, **kwargs)


class GenerationTimeoutError(CosmosHelpersError, TimeoutError):
    """A call or a job did not finish within its timeout."""


class ConnectionLostError(CosmosHelpersError, ConnectionError):
    """The server went away (refused, reset, or killed mid-request)."""


class JobFailedError(CosmosHelpersError):
    """An asynchronous job ended in ``failed``; carries the job record."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        error = job.get("error") or {}
        super().__init__(f"job {job.get('id')} failed: {error.get('message', 'no message')} (code {error.get('code')})")


class FrameworkRunError(CosmosHelpersError, RuntimeError):
    """A Cosmos Framework inference run exited non-zero; the message ends with its log tail."""


class UnknownModelError(ServerError, LookupError):
    """The server runs no deployment of the requested model (HTTP 404); ``models`` lists those it runs."""

    def __init__(self, status: int, message: str, *, models: list[str] | None = None, **kwargs: Any) -> None:
        self.models = list(models or [])
        super().__init__(status, message, **kwargs)


class SampleFailedError(CosmosHelpersError):
    """A sample came back with ``status`` ``"error"`` (or ``"skip"``: :class:`SampleSkippedError`); carries the
    server's message and stack trace."""

    def __init__(self, name: str, status: str, message: str | None, *, stack_trace: str | None = None) -> None:
        self.name, self.status, self.server_message, self.stack_trace = name, status, message, stack_trace
        super().__init__(f"sample {name!r}: {status}: {message or 'no message'}")


class SampleSkippedError(SampleFailedError):
    """The server skipped the sample: its model does not support what the sample asks for (``status="skip"``)."""
