"""One local Ray instance for the tests of this folder, and the stand-in Ray Serve app on it (two replicas of the tiny
model). Both go as soon as their tests are done (package and module scope), not at the end of the session: idle, Ray
and Serve keep about a tenth of a core busy, which the rest of the suite on a 2-core machine waits for.

Ray is given 4 logical CPUs on this 2-core machine so that the app's two replicas (one CPU each) and a batch's two
Ray-task workers can exist at once; the tests never make both busy together. Everything that waits has a deadline.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")


@pytest.fixture(scope="package")
def ray_instance():
    from cosmos_helpers.standins.ray_serve import join_ray

    started = join_ray(num_cpus=4)
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def standin(ray_instance, tmp_path_factory):
    from cosmos_helpers.standins.ray_serve import LocalRayServe

    server = LocalRayServe(tmp_path_factory.mktemp("ray_serve_app"), replicas=2, timeout=300).start()
    yield server
    server.stop()


def write_items(path: Path, count: int, **fields) -> list[dict]:
    """``count`` text2image requests at the framework's 256 tier, seeds 0.. (one colour and floor each)."""
    colours = ("red", "blue", "green", "yellow")
    items = [{"name": f"item_{i:02d}", "mode": "text2image", "prompt": f"a {colours[i % 4]} ball on a grey floor",
              "tier": "256", "seed": i, **fields} for i in range(count)]
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return items
