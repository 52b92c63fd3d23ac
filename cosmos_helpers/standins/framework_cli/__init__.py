"""STAND-IN for ``python -m cosmos_framework.scripts.inference``: NOT the NVIDIA Cosmos Framework.

A program that speaks the inference CLI's *command-line contract*, so
:class:`~cosmos_helpers.backends.framework.FrameworkBackend` runs end to end on a CPU machine without a framework
checkout (``FrameworkBackend.standin()``; or ``python -m cosmos_helpers.standins.framework_cli -i input.json -o
out/`` from any folder). It ships with the package and says what it is: its banner, and a ``standin.json`` beside
every output naming the framework it stands in for and the model that really ran.

* the model: the embedded **tiny** weights. ``--checkpoint-path tiny`` (``tiny-distilled``, ``tiny-edge``) names
  them under their own names; a framework checkpoint (``Cosmos3-Nano``, a folder) runs them too, with that
  checkpoint's defaults (a distilled 4-step checkpoint: the tiny weights in the distilled format, on the fixed
  schedule with guidance 1, as the framework runs one), and ``standin.json`` records both. It never shrinks what an
  input asks for (tests give it small inputs).
* flags: a subset of the real ones (checked against ``tests/contracts/fixtures``): ``-i/--input-files`` (files),
  ``-o/--output-dir``, ``--checkpoint-path``, the sample overrides ``--seed``, ``--resolution``, ``--num-steps``,
  ``--parallelism-preset``, ``--[no-]guardrails`` (on by default, as there: the tiny run then needs
  ``cosmos_guardrail``), ``--[no-]diffusion-cache`` (on by default, as there), ``--diffusion-cache-thresh``,
  ``--diffusion-cache-residual-order``; any other flag is an error, as in the real CLI;
* the diffusion cache: SeaCache with the framework's values through diffusers' own hooks (:mod:`.cache` says where
  it differs); the guidance passes it computed are in its log and in ``standin.json``;
* inputs: read as the framework reads them (a ``.json`` file holds one sample, a ``.jsonl`` one per line; a sample
  without ``name`` is named after its file) and validated against the real ``OmniSampleOverrides`` JSON schema
  (generated from the framework, shipped in ``cosmos_helpers/protocol/data``), so an unknown field fails here as it
  fails there;
* outputs, the framework's layout: ``<out>/<name>/vision.mp4`` (``vision.jpg`` for one frame),
  ``control_<hint>.mp4`` for transfer, an action sample's predicted actions in ``sample_outputs.json``;
  ``step k/N`` progress lines; on a bad input an ``ERROR: ...`` line and exit code 1.

Nothing heavy is imported here; the program is :mod:`.cli`.
"""

from __future__ import annotations

MODULE = __name__  # what FrameworkBackend.standin() runs with ``python -m``
