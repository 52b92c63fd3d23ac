"""A stand-in of the Cosmos Framework's Ray Serve app (cosmos-framework 5eee9ed ``inference/ray/serve.py``) to exercise
:class:`~cosmos_helpers.backends.framework_serve.FrameworkServeBackend` offline: real Ray Serve, the framework's routes
and models, the embedded tiny weights on CPU. Needs ``pip install 'cosmos-helpers[ray]'``."""

from __future__ import annotations

from .local import LocalRayServe, join_ray
from .samples import BANNER

__all__ = ["BANNER", "LocalRayServe", "join_ray"]
