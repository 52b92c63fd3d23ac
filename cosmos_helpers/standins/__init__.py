"""Stand-ins: programs that speak a real backend's contract on this package's embedded tiny model.

They let every notebook and test run offline on a CPU, and they ship with the package, so they work outside a
checkout and from any folder:

* :mod:`.vllm_omni`: a vLLM-Omni 0.30.0 server (FastAPI) backed by ``DiffusersBackend`` (``cosmos-helpers serve``,
  ``LocalServer``, ``connect_vllm_omni``);
* :mod:`.framework_cli`: the Cosmos Framework's inference command line (``python -m
  cosmos_helpers.standins.framework_cli``; ``FrameworkBackend.standin()`` runs it);
* :mod:`.chat`: an OpenAI-compatible chat endpoint that "upsamples" prompts (``ChatStandin``).

A stand-in is a convenience, never the oracle: the tests hold it to fixtures read from the real packages. Each one
says what it is where its real counterpart reports itself (the vLLM-Omni stand-in in its ``/v1/models`` card, the
framework stand-in in a ``standin.json`` beside each output and in its log), and the manifests of what it makes
record it (``Generation.standin``: which backend it stands in for and the model that really ran).

Nothing heavy is imported here.
"""

from __future__ import annotations

STANDIN_FILE = "standin.json"  # beside each output of the framework stand-in: what it is and what it ran
MODEL_CARD_KEY = "cosmos_helpers_standin"  # in the vLLM-Omni stand-in's /v1/models card (real servers have none)
