"""What SeaCache costs in meaning on the trained tiny model: the held-out checks cached and uncached, alike.

The trained tiny model's measurement (``cosmos_helpers.world.evaluate``) at 20 steps, once with diffusers' default
(no cache) and once with ``step_cache=SeaCache()`` (diffusers' defaults), on one ``DiffusersBackend``: text-to-video
colour and direction rates, image-to-video first-frame PSNR (worst sample), transfer edge F1 against a shuffled
control, the passes computed, and the PSNR of each cached clip against its uncached twin. Writes
``step_cache_quality.json`` and ``.md`` under ``--out``::

    python benchmarks/step_cache_quality.py --out benchmarks/gpu_results      # CPU, a few minutes
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

CHECKS = {"text2video": 60, "image2video": 8, "transfer": 12}


def measure(n_scale: float = 1.0, steps: int = 20, seed: int = 0) -> dict:
    from cosmos_helpers import DiffusersBackend, SeaCache
    from cosmos_helpers.world import meaning
    from cosmos_helpers.world.evaluate import evaluate

    backend = DiffusersBackend(progress=False)
    out: dict = {"steps": steps, "checks": {}}
    for check, n in CHECKS.items():
        n = max(2, round(n * n_scale))
        started = time.perf_counter()
        plain = evaluate(backend, n=n, seed=seed, checks=(check,), steps=steps)
        plain_s = time.perf_counter() - started
        cached = evaluate(backend, n=n, seed=seed, checks=(check,), steps=steps, step_cache=SeaCache())
        cached_s = time.perf_counter() - started - plain_s
        twins = [meaning.psnr(a["frames"], b["frames"]) for a, b in zip(plain.rows[check], cached.rows[check])]
        out["checks"][check] = {"n": n, "uncached": plain.summary(), "seacache": cached.summary(),
                                "psnr_cached_vs_uncached_db": {"mean": round(float(np.mean(twins)), 2),
                                                               "min": round(float(np.min(twins)), 2)},
                                "seconds": {"uncached": round(plain_s, 1), "seacache": round(cached_s, 1)}}
    return out


def markdown(result: dict) -> str:
    lines = [f"# SeaCache on the trained tiny model ({result['steps']} steps, held-out captions)", "",
             "| check | n | measure | uncached | SeaCache (diffusers defaults) | "
             "PSNR cached vs uncached (mean / min) |",
             "| --- | ---: | --- | ---: | ---: | ---: |"]
    for check, row in result["checks"].items():
        twins = row["psnr_cached_vs_uncached_db"]
        for key, value in row["uncached"].items():
            lines.append(f"| {check} | {row['n']} | {key} | {value:.3f} | {row['seacache'][key]:.3f} | "
                         f"{twins['mean']} / {twins['min']} dB |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("outputs/step_cache_quality"))
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the sample counts (CI: less)")
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    result = measure(a.scale, a.steps)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "step_cache_quality.json").write_text(json.dumps(result, indent=1))
    (a.out / "step_cache_quality.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
