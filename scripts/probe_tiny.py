"""How much each caption attribute matters to a tiny weights file: the flow loss with one word swapped.

    python scripts/probe_tiny.py                                   # the shipped weights, text-to-video
    python scripts/probe_tiny.py --weights run5/tiny-cosmos3-world.safetensors --mode image2video

Generated clips only show what a model has learnt well enough to win the sampler; the loss shows it earlier. For
held-out scenes this prints, per noise level, the mean flow loss with the true caption, with one attribute changed
(colour, direction, shape, floor), and unconditioned, all on the same latents and the same noise. A word the model
reads raises the loss when it is wrong; a gap of about zero means the model ignores that word. The scenes' captions
use held-out phrasings, so what is read is the word, not a memorised sentence.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import torch

from cosmos_helpers.models import tiny_trained
from cosmos_helpers.models.tiny_training import encode_latents, flow_loss, layout
from cosmos_helpers.presets import get_profile, size_for
from cosmos_helpers.world import caption, render, sample_scenes
from cosmos_helpers.world.scenes import COLOURS, DIRECTIONS, FLOORS, SHAPES, TEMPLATE_HELDOUT, TEMPLATES

OPPOSITE = {"left": "right", "right": "left", "up": "down", "down": "up"}
assert set(OPPOSITE) == set(DIRECTIONS)


def _next(values, value):
    values = list(values)
    return values[(values.index(value) + 1) % len(values)]


SWAPS = {
    "colour": lambda s: dataclasses.replace(s, colour=_next(COLOURS, s.colour)),
    "direction": lambda s: dataclasses.replace(s, direction=OPPOSITE[s.direction]),
    "shape": lambda s: dataclasses.replace(s, shape=_next(SHAPES, s.shape)),
    "floor": lambda s: dataclasses.replace(s, floor=_next(FLOORS, s.floor)),
}


@torch.no_grad()
def probe(weights: Path, mode: str, n: int, sigmas: list[float], seed: int) -> dict[float, dict[str, float]]:
    """Mean flow loss per noise level: ``true``, each swapped attribute, and ``unconditioned``."""
    pipe = tiny_trained.build_trained_pipeline(weights)
    defaults = get_profile("tiny").defaults("text2video")
    width, height = size_for(defaults.tier, defaults.aspect_ratio)
    frames, fps = defaults.num_frames, defaults.fps
    scenes = sample_scenes(n, seed=seed, split="heldout", frames=frames, width=width, height=height)
    x0 = encode_latents(pipe, render(scenes, width=width, height=height, frames=frames))
    out = {}
    for sigma in sigmas:
        totals = dict.fromkeys(["true", *SWAPS, "unconditioned"], 0.0)
        for i, scene in enumerate(scenes):
            texts = {"true": scene, **{name: swap(scene) for name, swap in SWAPS.items()}}
            template = len(TEMPLATES) + i % len(TEMPLATE_HELDOUT)  # one held-out phrasing for all five captions
            for name, shown in texts.items():
                ids, uncond = pipe.tokenize_prompt(caption(shown, style=template), None, num_frames=frames,
                                                   height=height, width=width, fps=fps)
                for key, tokens in ((name, ids),) + ((("unconditioned", uncond),) if name == "true" else ()):
                    lay = layout(pipe, tokens, tuple(x0.shape[1:]), mode, fps)
                    totals[key] += flow_loss(pipe.transformer, torch.tensor([tokens]), x0[i:i + 1],
                                             torch.tensor([sigma]), lay, torch.Generator().manual_seed(i)).item()
        out[sigma] = {k: v / n for k, v in totals.items()}
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--weights", type=Path, default=tiny_trained.WEIGHTS)
    p.add_argument("--mode", default="text2video", choices=["text2video", "image2video"])
    p.add_argument("-n", type=int, default=48, help="held-out scenes")
    p.add_argument("--sigmas", type=float, nargs="+", default=[0.95, 0.8])
    p.add_argument("--seed", type=int, default=5)
    args = p.parse_args(argv)
    torch.manual_seed(0)
    print(f"{'noise':>6} {'true':>7} " + " ".join(f"{name + ' +':>12}" for name in [*SWAPS, "uncond"]))
    for sigma, row in probe(args.weights, args.mode, args.n, args.sigmas, args.seed).items():
        gaps = " ".join(f"{row[k] - row['true']:>+12.4f}" for k in [*SWAPS, "unconditioned"])
        print(f"{sigma:>6.2f} {row['true']:>7.4f} {gaps}")


if __name__ == "__main__":
    main()
