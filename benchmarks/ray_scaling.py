"""One replica against two: the same tiny batch through the Ray Serve stand-in and as Ray tasks, in one run.

A local Ray instance of ``--cpus`` CPUs (default: this machine's) runs, one after the other:

* the stand-in of the Cosmos Framework's Ray Serve app with 1 replica, then with 2 (``FrameworkServeBackend``,
  ``--concurrency`` requests in flight, default 2);
* the same items as Ray tasks on 1 actor, then on 2 (``run_batch(ray=True, workers=N)``).

Each configuration first runs a two-item warm-up batch (not timed: every replica or worker has its model loaded and
has made one generation), then the timed batch of ``--items`` text-to-video requests at the framework's 256 tier
(320x192), ``--frames`` frames and ``--steps`` steps, sized so that a generation (a few seconds on one core) dwarfs
Ray's routing (milliseconds). The time of a batch is from its first item's start to its last item's end, as the
workers clocked them. Printed as markdown; each run writes into a fresh ``ray-scaling-<time>`` folder under ``--out``
(default the temporary folder), with the JSON and, with ``--out``, the timeline plot::

    python benchmarks/ray_scaling.py                     # 12 items, 9 frames, 4 steps
    python benchmarks/ray_scaling.py --items 24 --out outputs/ray_scaling

Exit code 1 when two replicas take more than ``--target`` (0.65) of one replica's time on the Serve path.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per replica or worker: they must not fight over threads
os.environ.setdefault("COSMOS_HELPERS_NO_PROGRESS", "1")

from cosmos_helpers.batch import run_batch  # noqa: E402
from cosmos_helpers.standins.ray_serve import LocalRayServe, join_ray  # noqa: E402

COLOURS = ("red", "blue", "green", "yellow")


def write_items(path: Path, count: int, frames: int, steps: int, prefix: str) -> Path:
    lines = [{"name": f"{prefix}_{i:02d}", "mode": "text2video", "prompt": f"a {COLOURS[i % 4]} ball rolls on a "
              "grey floor", "tier": "256", "num_frames": frames, "num_inference_steps": steps, "seed": i}
             for i in range(count)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def span(result) -> float:
    """First start to last end of the items made now (the workers' clocks), in seconds."""
    made = [r for r in result.records if r.status == "ok"]
    return max(r.finished for r in made) - min(r.started for r in made)


def serve_batch(root: Path, replicas: int, items: Path, warmup: Path, concurrency: int):
    with LocalRayServe(root / f"server_{replicas}", replicas=replicas, timeout=600) as server:
        backend = server.backend(timeout=600)
        run_batch(warmup, root / f"serve_{replicas}_warmup", backend=backend, concurrency=concurrency, gallery=False)
        return run_batch(items, root / f"serve_{replicas}", backend=backend, concurrency=concurrency, gallery=False)


def task_batch(root: Path, workers: int, items: Path, warmup: Path):
    # the warm-up runs on its own pool: each pool loads its models once, as a real batch would
    run_batch(warmup, root / f"tasks_{workers}_warmup", ray=True, workers=workers, gallery=False)
    return run_batch(items, root / f"tasks_{workers}", ray=True, workers=workers, gallery=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=12)
    parser.add_argument("--frames", type=int, default=9)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=None, help="the local Ray instance's CPUs (default: all)")
    parser.add_argument("--target", type=float, default=0.65)
    parser.add_argument("--skip-tasks", action="store_true", help="only the Serve path")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    # a fresh folder per run: finished items of an earlier run would be skipped, not timed
    root = (args.out or Path(tempfile.gettempdir())) / time.strftime("ray-scaling-%Y%m%d-%H%M%S")
    root.mkdir(parents=True)
    started = time.perf_counter()
    join_ray(num_cpus=args.cpus)
    results, rows = {}, []
    for label, run in (("serve", serve_batch), ("tasks", task_batch)):
        if label == "tasks" and args.skip_tasks:
            continue
        for count in (1, 2):
            items = write_items(root / f"{label}_{count}.jsonl", args.items, args.frames, args.steps, "item")
            warmup = write_items(root / f"{label}_{count}_warmup.jsonl", 2, args.frames, args.steps, "warmup")
            extra = (args.concurrency,) if label == "serve" else ()
            result = run(root, count, items, warmup, *extra)
            assert result.ok, result.failed
            results[(label, count)] = result
            rows.append({"path": label, "workers": count, "seconds": round(span(result), 2),
                         "per_item_s": round(sum(r.seconds for r in result.records) / len(result.records), 2),
                         "distinct_workers": len({r.worker for r in result.records})})
    ratios = {label: rows_of(rows, label, 2) / rows_of(rows, label, 1) for label in ("serve", "tasks")
              if (label, 2) in results}
    print(f"\n{args.items} text2video items, 320x192, {args.frames} frames, {args.steps} steps, tiny model, "
          f"{os.cpu_count()} cores, ray {ray_version()}; total {time.perf_counter() - started:.0f} s\n")
    print("| path | workers | batch s | mean item s | workers used |\n|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['path']} | {row['workers']} | {row['seconds']} | {row['per_item_s']} | "
              f"{row['distinct_workers']} |")
    for label, ratio in ratios.items():
        print(f"\n{label}: two / one = {ratio:.3f}")
    report = {"rows": rows, "ratios": ratios, "items": args.items, "frames": args.frames, "steps": args.steps,
              "cores": os.cpu_count(), "target": args.target}
    (root / "ray_scaling.json").write_text(json.dumps(report, indent=1))
    if args.out:
        from cosmos_helpers.views.timeline import batch_timeline

        figure = batch_timeline(*results.values(), labels=[f"{k[0]} x{k[1]}" for k in results], display=False)
        figure.savefig(root / "ray_scaling.png")
    return 0 if ratios["serve"] <= args.target else 1


def rows_of(rows: list[dict], label: str, workers: int) -> float:
    return next(r["seconds"] for r in rows if r["path"] == label and r["workers"] == workers)


def ray_version() -> str:
    import ray

    return ray.__version__


if __name__ == "__main__":
    sys.exit(main())
