"""Stand-ins: programs that speak a real backend's contract on the embedded tiny model, so every notebook and test
runs offline on a CPU, from any folder: :mod:`.vllm_omni` (the server), :mod:`.framework_cli` (the framework's
inference command line), :mod:`.ray_serve` (the framework's Ray Serve app) and :mod:`.chat` (a chat endpoint that
"upsamples" prompts).

A stand-in is never the oracle: tests hold it to fixtures read from the real packages. Each says what it is where
its real counterpart reports itself (the constants below), and manifests record it (``Generation.standin``).
"""

from __future__ import annotations

STANDIN_FILE = "standin.json"  # beside each output of the framework stand-in: what it is and what it ran
MODEL_CARD_KEY = "cosmos_helpers_standin"  # in the vLLM-Omni stand-in's /v1/models card (real servers have none)
