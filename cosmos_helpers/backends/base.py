"""What every backend is: a :class:`~cosmos_helpers.request.GenerationRequest` in, a
:class:`~cosmos_helpers.result.Generation` out; whatever differs lives in the backend, so no caller tests its name.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Collection, Mapping, Sequence

from ..errors import ValidationError
from ..request import GenerationRequest
from ..result import Generation
from ..specs.load import Sample
from ..specs.resolve import ResolvedSample
from ..specs.runs import (PlannedRun, SampleRun, SampleSupport, check_as_request, check_portable, generation_request,
                          localize)

ProgressCallback = Callable[[int, int], None]  # (steps done, steps in all)


class Backend:
    """The base of every backend: subclasses set :attr:`name`, implement :meth:`generate`, and override what differs."""

    name: ClassVar[str] = ""
    remote: ClassVar[bool] = False  # the work happens on a server: several calls may overlap
    sample_support: ClassVar[SampleSupport] = SampleSupport()  # what a sample run as a request may ask here
    as_written: ClassVar[bool] = False  # samples run unchanged: the framework applies its defaults, fetches URLs

    def check(self, request: GenerationRequest) -> None:
        """Raise ``ValidationError`` for what this backend cannot run as asked, before any model loads or any request
        leaves the machine (the default refuses nothing); overrides read ``request.resolve()``."""

    def generate(self, request: GenerationRequest, *, progress: ProgressCallback | None = None) -> Generation:
        """Run one request (resolved once, on entry); ``progress(step, total)`` after each step where it can tell."""
        raise NotImplementedError

    def generate_many(self, requests: Sequence[GenerationRequest], *,
                      names: Sequence[str] | None = None) -> list[Generation]:
        """Several requests (``names``: a stem each, for backends that name their own output folders). Every one is
        checked before the first runs; the default then runs them one after another."""
        requests = [request.resolve() for request in requests]
        for request in requests:
            self.check(request)
        return [self.generate(request) for request in requests]

    def output_settings(self) -> dict[str, Any]:
        """What, besides the request, shapes the outputs (a rerun with other settings is not finished work)."""
        return {}

    def close(self) -> None:
        """Let go of what the backend holds (worker processes, connections); a later call starts them again."""

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # Framework input samples (run_spec), in this order: resolve_sample, check_sample, localize, dry_run or run_sample.
    # The defaults run a sample as the request it means; the framework's backends run it as written.

    def resolve_sample(self, sample: Sample, *, folder: Any, profile: str | None, model: str | None,
                       overrides: Mapping[str, Any] | None, guardrails: bool | None) -> ResolvedSample:
        """The framework's defaults, the profile's where ``sample`` leaves a field unset, the overrides over both, the
        seed from ``folder``; run :attr:`as_written`, the profile only picks model and guardrails (the framework draws
        the seed)."""
        return sample.resolved(profile=profile, model=model, overrides=overrides, guardrails=guardrails,
                               output_dir=None if self.as_written else folder, fill=not self.as_written)

    def check_sample(self, sample: Sample, r: ResolvedSample, given: set[str], step_cache: Any = None) -> None:
        """Every refusal before any work (``given``: the fields the input or the command line set); by default what a
        request cannot say or :attr:`sample_support` does not cover, and a run's step cache."""
        check_portable(sample, r)
        check_as_request(sample, r, given, self.name, self.sample_support)
        if step_cache is not None:
            raise ValidationError("step_cache", f"the {self.name} backend takes no step cache for a sample run.",
                                  "leave step_cache out (--step-cache), or run the sample on the framework.")

    def localize(self, r: ResolvedSample, given: set[str], *, progress: Any = True,
                 server_paths: bool = False) -> ResolvedSample:
        """``r`` with its inputs where this backend reads them (by default URLs fetched into the framework's download
        cache; as it is when run :attr:`as_written`), checked where a check needs the files themselves."""
        return r if self.as_written else localize(r, progress=bool(progress))

    def dry_run(self, run: SampleRun, *, pending: Collection[str] = ()) -> PlannedRun:
        """What would run, without running it (``pending``: controls that would be computed first). The default
        records the checked run; a backend that writes its input for elsewhere writes it here."""
        return PlannedRun(run)

    def run_sample(self, run: SampleRun, *, progress: Any = True, server_paths: bool = False) -> Generation:
        """The checked run's output (unsaved): by default its request's (a callable ``progress`` gets the steps)."""
        request = generation_request(run.resolved, run.given, run.step_cache)
        return self.generate(request, progress=progress if callable(progress) else None)
