"""STAND-IN for ``python -m cosmos_framework.scripts.inference``: NOT the NVIDIA Cosmos Framework.

A program that speaks the inference CLI's *command-line contract*, so ``FrameworkBackend`` runs end to end on a CPU
without a checkout (``FrameworkBackend.standin()``, or ``python -m cosmos_helpers.standins.framework_cli -i input.json
-o out/``). It says what it is: its banner, and a ``standin.json`` beside every output naming the model that ran.

* the model: the embedded **tiny** weights, under their own names (``tiny``, ``tiny-distilled``, ``tiny-edge``) or
  with a framework checkpoint's defaults (a distilled one on its fixed schedule, guidance 1). It never shrinks what
  an input asks for;
* flags: a subset of the real ones (checked against ``tests/contracts/fixtures``); ``--[no-]guardrails`` and
  ``--[no-]diffusion-cache`` are on by default, as there; any other flag is an error, as in the real CLI;
* the diffusion cache: SeaCache with the framework's values through diffusers' own hooks (:mod:`.cli`);
* inputs and outputs as the framework's (``.json``: one sample, ``.jsonl``: one per line, validated against the real
  ``OmniSampleOverrides`` schema; ``<out>/<name>/vision.mp4`` or ``.jpg``, ``control_<hint>.mp4``,
  ``sample_outputs.json``); ``step k/N`` progress lines; on a bad input an ``ERROR: ...`` line and exit code 1.
"""

from __future__ import annotations

MODULE = __name__  # what FrameworkBackend.standin() runs with ``python -m``
