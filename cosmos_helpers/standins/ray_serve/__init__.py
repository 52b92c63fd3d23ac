"""A stand-in of the Cosmos Framework's Ray Serve app (cosmos-framework 5eee9ed ``inference/ray/serve.py``).

Real Ray Serve on a local Ray instance (or any cluster), the framework's routes and models, the embedded tiny weights
on CPU: for notebooks, tests and CI to exercise the client (:class:`~cosmos_helpers.backends.framework_serve.
FrameworkServeBackend`), routing over replicas and batches. It is never the oracle: the contract comes from the
framework's own source (``tests/contracts/fixtures/ray_serve-5eee9ed.json``), and every answer says it is a stand-in
and which model ran. :mod:`.app` (the deployments), :mod:`.samples` (one sample on a replica), :mod:`.local` (start
and stop), :mod:`.cli` (``cosmos-helpers serve-ray``). Needs ``pip install 'cosmos-helpers[ray]'``.
"""

from __future__ import annotations

from .local import LocalRayServe, join_ray
from .samples import BANNER

__all__ = ["BANNER", "LocalRayServe", "join_ray"]
