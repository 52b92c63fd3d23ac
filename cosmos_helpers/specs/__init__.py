"""Cosmos Framework input files (``-i``): every mode's samples, read, checked and resolved as the framework does.

* :func:`load_inputs` / :func:`load_spec` read a ``.json`` (one object or a list) or ``.jsonl`` file into
  :class:`Sample` s: the fields as written (``Sample.data``), typed by :class:`SampleFields` (the framework's
  ``OmniSampleOverrides``: any other key is refused, with the closest real one suggested);
* :meth:`Sample.resolved` says what the framework runs a sample with, in its order of defaults, with the source of
  every value (:class:`ResolvedSample`);
* :mod:`~cosmos_helpers.specs.runs` says what each backend can honour and fingerprints a run;
  ``cosmos_helpers.transfer.runner.run_spec`` runs a sample anywhere.
"""

from __future__ import annotations

from .fields import SampleFields
from .load import Sample, as_sample, load_inputs, load_spec
from .resolve import ResolvedHint, ResolvedSample, resolve
from .runs import SampleRun, check_backend, generation_request, given_fields

__all__ = ["ResolvedHint", "ResolvedSample", "Sample", "SampleFields", "SampleRun", "as_sample",
           "check_backend", "generation_request", "given_fields", "load_inputs", "load_spec", "resolve"]
