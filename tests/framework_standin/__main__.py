"""STAND-IN for ``python -m cosmos_framework.scripts.inference`` -- NOT the NVIDIA Cosmos Framework.

A test double that implements the framework inference CLI's *command-line contract* with this project's
diffusers code on the embedded tiny model, so :class:`cosmos_helpers.backends.framework.FrameworkBackend` can be
tested end to end on a CPU machine without a framework checkout:

* arguments: ``-i/--input SPEC`` (a JSON object, a JSON list, or JSONL with one object per line), ``-o/--output
  DIR``, ``--checkpoint-path``, ``--seed``, ``--parallelism-preset {latency,throughput}``, ``--no-guardrails``,
  ``--no-diffusion-cache``, ``--video-save-quality``; unknown extra flags are accepted and ignored;
* inputs: transfer specs (any hint) and ``audio_image2video`` specs run through
  ``cosmos_helpers.transfer.diffusers_transfer.run_spec``; audiovisual payloads (``text2image``, ``text2video``,
  ``image2video``, optional ``enable_sound``) through ``DiffusersBackend``; always on profile ``tiny`` (CPU tier
  128, few steps), whatever ``resolution``/``--checkpoint-path`` say;
* outputs: ``<out>/<name>/vision.mp4`` (``vision.png`` for images) plus ``control_<hint>.mp4`` for transfer;
* progress lines ``step k/N`` on stdout; on a bad spec an ``ERROR: ...`` line and exit code 1.

Run it as ``python -m tests.framework_standin -i spec.json -o out/`` from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

STANDIN_BANNER = "[framework stand-in] cosmos_helpers tests double, not the NVIDIA Cosmos Framework"


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="framework_standin", description=__doc__.splitlines()[0])
    parser.add_argument("-i", "--input", required=True)
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--checkpoint-path", default="Cosmos3-Nano")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--parallelism-preset", choices=("latency", "throughput"), default="throughput")
    parser.add_argument("--no-guardrails", action="store_true")
    parser.add_argument("--no-diffusion-cache", action="store_true")
    parser.add_argument("--video-save-quality", type=int, default=None)
    return parser.parse_known_args(argv)


def read_specs(path: Path) -> list[tuple[dict, Path]]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
        items = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"each spec must be a JSON object, got {type(item).__name__}")
    return [(item, path.parent) for item in items]


def run_one(item: dict, base: Path, out: Path, args: argparse.Namespace) -> Path:
    from cosmos_helpers.transfer.spec import HINT_KINDS, TransferSpec

    name = str(item.get("name") or "output")
    folder = out / name
    seed = item.get("seed", args.seed)

    def step(done: int, total: int) -> None:
        print(f"step {done}/{total}", flush=True)

    av_keys = {"enable_sound"}
    is_transfer_like = any(k in item for k in HINT_KINDS) or item.get("model_mode") == "audio_image2video"
    if is_transfer_like:
        from cosmos_helpers.transfer.diffusers_transfer import TransferGeneration, run_spec

        fields = {k: v for k, v in item.items() if k not in av_keys}
        spec = TransferSpec.from_dict(fields, base_dir=base)
        spec.validate(tiers=("128", "256", "480", "720", "768"))
        generation = run_spec(spec, profile="tiny", seed=seed, progress=step)
        quality = args.video_save_quality if args.video_save_quality is not None else (
            item.get("video_save_quality", 10))
        if isinstance(generation, TransferGeneration):
            return generation.save_framework_layout(out, name, quality=quality, overwrite=True)
        from cosmos_helpers import media

        folder.mkdir(parents=True, exist_ok=True)
        return media.write_mp4(folder / "vision.mp4", generation.frames, generation.fps, sound=generation.sound,
                               sample_rate=generation.sample_rate, overwrite=True)
    from cosmos_helpers import DiffusersBackend, GenerationRequest, media

    mode = item.get("model_mode") or ("image2video" if item.get("vision_path") else "text2video")
    image = item.get("vision_path")
    if image is not None and not Path(image).is_absolute():
        image = str(base / image)
    request = GenerationRequest(
        mode=mode, prompt=item.get("prompt") or "", negative_prompt=item.get("negative_prompt") or None,
        profile="tiny", fps=item.get("fps"), sound=bool(item.get("enable_sound", False)), image=image,
        guidance_scale=item.get("guidance"), flow_shift=item.get("shift"), seed=int(seed or 0),
        num_frames=None if mode == "text2image" else _tiny_frames(item.get("num_frames")),
    )
    generation = DiffusersBackend("tiny", progress=False).generate(request, progress=step)
    folder.mkdir(parents=True, exist_ok=True)
    if generation.is_image:
        return media.write_png(folder / "vision.png", generation.frames[0], overwrite=True)
    return media.write_mp4(folder / "vision.mp4", generation.frames, generation.fps, sound=generation.sound,
                           sample_rate=generation.sample_rate, overwrite=True)


def _tiny_frames(num_frames) -> int:
    """The stand-in keeps CPU runs short: at most 17 frames, 4k+1."""
    frames = int(num_frames or 9)
    frames = max(5, min(frames, 17))
    return (frames - 1) // 4 * 4 + 1


def main(argv: list[str] | None = None) -> int:
    args, unknown = parse_args(argv)
    print(STANDIN_BANNER, flush=True)
    if unknown:
        print(f"ignoring flags: {' '.join(unknown)}", flush=True)
    os.environ.setdefault("COSMOS_HELPERS_NO_PROGRESS", "1")
    out = Path(args.output)
    try:
        specs = read_specs(Path(args.input))
        if os.environ.get("OMP_NUM_THREADS"):
            import torch

            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        for item, base in specs:
            path = run_one(item, base, out, args)
            print(f"saved {path}", flush=True)
    except Exception as exc:  # the framework logs the error and exits non-zero
        traceback.print_exc(file=sys.stdout)
        print(f"ERROR: {type(exc).__name__}: {exc}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
