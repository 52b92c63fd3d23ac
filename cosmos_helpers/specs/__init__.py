"""Cosmos Framework input files (``-i``): every mode's samples, read, checked and resolved as the framework does.

* :func:`load_inputs` / :func:`load_spec` read a ``.json`` (one object or a list) or ``.jsonl`` file into
  :class:`Sample` s: the fields as written (``Sample.data``), typed by :class:`SampleFields` (the framework's
  ``OmniSampleOverrides``: any other key is refused, with the closest real one suggested);
* :meth:`Sample.resolved` says what the framework runs a sample with, in its order of defaults, with the source of
  every value (:class:`ResolvedSample`);
* :mod:`~cosmos_helpers.specs.runs` says what a sample run as a request can honour (each backend states what it
  supports) and fingerprints a run;
  ``cosmos_helpers.transfer.runner.run_spec`` runs a sample anywhere.
"""

from __future__ import annotations

from .fields import SampleFields
from .load import Sample, as_sample, load_inputs, load_spec
from .resolve import ResolvedHint, ResolvedSample, resolve
from .runs import PlannedRun, SampleRun, SampleSupport, check_as_request, generation_request, given_fields

__all__ = ["PlannedRun", "ResolvedHint", "ResolvedSample", "Sample", "SampleFields", "SampleRun", "SampleSupport",
           "as_sample", "check_as_request", "generation_request", "given_fields", "load_inputs", "load_spec", "resolve"]
