"""STAND-IN for ``python -m cosmos_framework.scripts.inference``: NOT the NVIDIA Cosmos Framework.

The inference CLI's command-line contract (a subset of its flags, checked against ``tests/contracts/fixtures``; its
input files, validated against the real ``OmniSampleOverrides`` schema; its output layout) on the embedded tiny
weights, so ``FrameworkBackend.standin()`` runs end to end on a CPU without a checkout. It never shrinks what an input
asks for, and says what it is: its banner, and a ``standin.json`` beside every output naming the model that ran.
:mod:`.cli` says where its diffusion cache differs from the framework's.
"""

from __future__ import annotations

MODULE = __name__  # what FrameworkBackend.standin() runs with ``python -m``
