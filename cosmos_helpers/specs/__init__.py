"""Cosmos Framework input files (``-i``): every mode's samples, read (:func:`load_inputs`), checked and resolved
(:meth:`Sample.resolved`) as the framework does; :mod:`.runs` says what a backend running a sample as a request can
honour and fingerprints a run (``cosmos_helpers.transfer.runner.run_spec`` runs a sample anywhere)."""

from __future__ import annotations

from .fields import SampleFields
from .load import Sample, as_sample, load_inputs, load_spec
from .resolve import ResolvedHint, ResolvedSample, resolve
from .runs import PlannedRun, SampleRun, SampleSupport, check_as_request, generation_request, given_fields

__all__ = ["PlannedRun", "ResolvedHint", "ResolvedSample", "Sample", "SampleFields", "SampleRun", "SampleSupport",
           "as_sample", "check_as_request", "generation_request", "given_fields", "load_inputs", "load_spec", "resolve"]
