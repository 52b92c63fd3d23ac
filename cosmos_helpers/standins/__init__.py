"""Stand-ins: programs that speak a real backend's contract on the embedded tiny model, offline on a CPU from any folder
(:mod:`.vllm_omni`, :mod:`.framework_cli`, :mod:`.ray_serve`, :mod:`.chat`). Never the oracle (tests hold them to
fixtures read from the real packages); each says what it is where its real counterpart reports itself (below)."""

from __future__ import annotations

STANDIN_FILE = "standin.json"  # beside each output of the framework stand-in: what it is and what it ran
MODEL_CARD_KEY = "cosmos_helpers_standin"  # in the vLLM-Omni stand-in's /v1/models card (real servers have none)
