"""What every backend is: one class that workflows, the CLI, specs, long videos and sweeps can rely on.

A backend translates a :class:`~cosmos_helpers.request.GenerationRequest` into its own call and the answer back into
a :class:`~cosmos_helpers.result.Generation`. Everything that differs between backends lives in the backend (its
refusals, its wire format, how it runs several requests at once, which of its settings shape an output), so code
outside ``backends/`` never tests a backend's name or probes it with ``getattr``.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Sequence

from ..request import GenerationRequest
from ..result import Generation

ProgressCallback = Callable[[int, int], None]  # (steps done, steps in all)


class Backend:
    """The base of every backend.

    Subclasses set :attr:`name` and implement :meth:`generate`; they override :meth:`check` with every refusal they
    make before any work, :meth:`generate_many` when several requests can share one run, :meth:`output_settings` when
    settings outside the request shape their outputs, and :meth:`close` when they hold processes or connections.
    """

    name: ClassVar[str] = ""

    def check(self, request: GenerationRequest) -> None:
        """Raise :class:`~cosmos_helpers.errors.ValidationError` for anything in ``request`` this backend cannot run
        as asked, before any model loads or any request leaves the machine. The default refuses nothing."""

    def generate(self, request: GenerationRequest, *, progress: ProgressCallback | None = None) -> Generation:
        """Run one request; ``progress(step, total)`` after each denoising step where the backend can tell."""
        raise NotImplementedError

    def generate_many(self, requests: Sequence[GenerationRequest], *,
                      names: Sequence[str] | None = None) -> list[Generation]:
        """Several requests (``names``: a stem each, for backends that name their own output folders). Every one is
        checked before the first runs; the default then runs them one after another."""
        for request in requests:
            self.check(request)
        return [self.generate(request) for request in requests]

    def output_settings(self) -> dict[str, Any]:
        """What, besides the request, shapes this backend's outputs (a rerun with other settings is not finished
        work). A client whose server holds its settings has none of its own."""
        return {}

    def close(self) -> None:
        """Let go of what the backend holds (worker processes, connections); a later call starts them again."""

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
