"""Train the embedded tiny Cosmos3 on the synthetic world; writes the weights the ``tiny`` profile ships.

    python scripts/train_tiny.py --out build/tiny-world            # one GPU, about 9 minutes
    python scripts/train_tiny.py --out build/more --init build/tiny-world/tiny-cosmos3-world.safetensors \
        --vae-minutes 0                                             # continue the transformer from a weights file
    python scripts/train_tiny.py --out /tmp/smoke --vae-steps 2 --transformer-steps 2 --device cpu   # a smoke run

Two stages, both on clips rendered on the fly from the training split of ``cosmos_helpers.world`` (held-out
attribute combinations and phrasings never appear):

1. the Wan2.2-layout VAE learns to reconstruct clips and stills (its latent statistics are then measured, since
   the pipeline normalises latents with them);
2. the Cosmos3 transformer learns flow matching on those latents for text-to-image, text-to-video,
   image-to-video and video-to-video, with sentence and structured JSON captions, each sample packed exactly as
   the pipeline packs it (``cosmos_helpers.models.tiny_training``), 10% of batches unconditioned for guidance.
   ``--mix text2video --motion-weight 8`` weighs text-to-video and the moving object more: without it the
   caption's direction word barely matters to the model (``scripts/probe_tiny.py``; the model card has the
   numbers and the chain of commands that made the shipped weights).

The output folder gets ``tiny-cosmos3-world.safetensors``, ``MODEL_CARD.md`` and ``training_log.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from cosmos_helpers.models import tiny_trained
from cosmos_helpers.models.tiny_training import encode_latents, flow_loss, layout, shifted_sigmas, transfer_token_ids
from cosmos_helpers.presets import get_profile, size_for
from cosmos_helpers.world import caption, caption_json, render, sample_scenes
from cosmos_helpers.world import controls as world_controls

# (tier, aspect) -> share: the CPU tier the tiny profile uses, and the framework's smallest tier at its default
# aspect (the framework stand-in runs the tiny model at the framework's sizes). Portrait frames are left out: the
# world's fast objects do not stay inside them for a whole clip.
VIDEO_SIZES = {("128", "16,9"): 0.6, ("128", "1,1"): 0.1, ("128", "4,3"): 0.1, ("256", "16,9"): 0.2}
IMAGE_SIZES = {("128", "1,1"): 0.5, ("128", "16,9"): 0.15, ("128", "4,3"): 0.15, ("256", "1,1"): 0.2}
# --mix: (share of each kind of batch, share of each video mode). "text2video" weighs the mode whose motion comes
# from the caption alone; in image- and video-to-video the conditioning frames already show where things go.
MIXES = {
    "balanced": ({"video": 0.6, "image": 0.15, "transfer": 0.25},
                 {"text2video": 0.4, "image2video": 0.3, "video2video": 0.3}),
    "text2video": ({"video": 0.7, "image": 0.1, "transfer": 0.2},
                   {"text2video": 0.6, "image2video": 0.2, "video2video": 0.2}),
}
HINTS = ("edge", "blur")
IMAGE_SHARE, JSON_SHARE, UNCOND_SHARE, NO_CONTROL_SHARE = 0.2, 0.25, 0.1, 0.1
POOL = 2000  # scenes per (kind, size), rendered and encoded once; their captions repeat, tokenised once each
LR, VAE_LR = 1e-3, 1e-3
# Training noise levels follow shift 3 (plus a uniform share): with the tiny profile's 4 steps this covers the
# whole schedule, where Nano's video shift of 10 would leave the low-noise half almost untrained.
SHIFT = 3.0


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0, help="data and initialisation seed")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--init", type=Path, default=None,
                   help="start from this weights file (its VAE and latent statistics stay as they are)")
    p.add_argument("--vae-minutes", type=float, default=3.0, help="0 skips the VAE stage (required with --init)")
    p.add_argument("--total-minutes", type=float, default=9.0,
                   help="the transformer trains until this much wall time has passed since the start")
    p.add_argument("--vae-steps", type=int, default=None, help="stop the VAE stage after this many steps")
    p.add_argument("--transformer-steps", type=int, default=None)
    p.add_argument("--vae-batch", type=int, default=32)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--pool", type=int, default=POOL, help="training clips per (kind, size)")
    p.add_argument("--mix", choices=sorted(MIXES), default="balanced", help="shares of batch kinds and video modes")
    p.add_argument("--motion-weight", type=float, default=0.0,
                   help="weigh tokens that change over the clip by 1 + this (tiny_training.motion_weights)")
    return p.parse_args(argv)


def _pick(weights: dict, rng: random.Random):
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _frames(kind: str, profile) -> int:
    return 1 if kind == "image" else profile.defaults("text2video").num_frames


class Budget:
    """Stop after ``minutes`` of wall time or ``steps`` steps, whichever comes first."""

    def __init__(self, minutes: float, steps: int | None):
        self.started, self.seconds, self.steps, self.done = time.monotonic(), 60 * minutes, steps, 0

    def __bool__(self) -> bool:
        return self.progress() < 1.0

    def progress(self) -> float:
        """How much of the budget is spent, 0..1 (time or steps, whichever is further along)."""
        by_time = (time.monotonic() - self.started) / self.seconds if self.seconds > 0 else 1.0
        return max(by_time, self.done / self.steps if self.steps is not None else 0.0)

    def lr(self, peak: float, warmup: int) -> float:
        """Linear warmup, then a cosine decay to a tenth of ``peak`` at the end of the budget."""
        decay = 0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, self.progress())))
        return peak * min(1.0, (self.done + 1) / warmup) * decay


def train_vae(pipe, args, rng: random.Random, log: list) -> None:
    """Reconstruction (MSE + L1) of clips and stills, with a little latent noise so the decoder tolerates the
    imperfect latents a 4-step sampler hands it."""
    vae = pipe.vae.to(args.device).train()
    opt = torch.optim.AdamW(vae.parameters(), lr=VAE_LR, weight_decay=0.0)
    profile, budget = get_profile("tiny"), Budget(args.vae_minutes, args.vae_steps)
    started = time.monotonic()
    while budget:
        kind = "image" if rng.random() < IMAGE_SHARE else "video"
        sizes = {k: v for k, v in (IMAGE_SIZES if kind == "image" else VIDEO_SIZES).items() if k[0] == "128"}
        width, height = size_for(*_pick(sizes, rng))  # the convolutions carry over to larger frames
        frames = _frames(kind, profile)
        scenes = sample_scenes(args.vae_batch, seed=rng.randrange(2**31), split="train", frames=frames,
                               width=width, height=height)
        x = render(scenes, width=width, height=height, frames=frames, device=args.device)
        z = vae.encode(x).latent_dist.mode()
        z = z + 0.05 * z.detach().std() * torch.randn_like(z)
        y = vae.decode(z).sample
        loss = torch.nn.functional.mse_loss(y, x) + 0.5 * (y - x).abs().mean() + 1e-4 * z.pow(2).mean()
        for group in opt.param_groups:
            group["lr"] = budget.lr(VAE_LR, warmup=100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(vae.parameters(), 1.0)
        opt.step()
        budget.done += 1
        if budget.done % 100 == 0 or not budget:
            log.append({"stage": "vae", "step": budget.done, "loss": round(loss.item(), 5),
                        "seconds": round(time.monotonic() - started, 1)})
            print(log[-1], flush=True)
    vae.eval()
    log.append({"stage": "vae", "step": budget.done, "heldout_psnr": round(_reconstruction_psnr(vae, args), 2)})
    print(log[-1], flush=True)


@torch.no_grad()
def _reconstruction_psnr(vae, args) -> float:
    """PSNR (dB) of VAE reconstructions of held-out clips at the tiny profile's default size."""
    width, height = size_for("128", "16,9")
    scenes = sample_scenes(32, seed=10_000 + args.seed, split="heldout", frames=9, width=width, height=height)
    x = render(scenes, width=width, height=height, frames=9, device=args.device)
    y = vae.decode(vae.encode(x).latent_dist.mode()).sample.clamp(-1, 1)
    mse = ((y - x) / 2).pow(2).mean().clamp_min(1e-10)
    return float(-10 * torch.log10(mse))


@torch.no_grad()
def set_latent_stats(pipe, args, rng: random.Random) -> None:
    """Measure per-channel latent mean and std on training clips and write them where the pipeline reads them."""
    vae = pipe.vae
    width, height = size_for("128", "16,9")
    zs = []
    for _ in range(8):
        scenes = sample_scenes(32, seed=rng.randrange(2**31), split="train", frames=9, width=width, height=height)
        zs.append(vae.encode(render(scenes, width=width, height=height, frames=9, device=args.device))
                  .latent_dist.mode().transpose(0, 1).reshape(48, -1))
    z = torch.cat(zs, dim=1)
    mean = [round(float(v), 5) for v in z.mean(dim=1)]
    std = [round(float(v), 5) for v in z.std(dim=1).clamp_min(1e-3)]
    vae.register_to_config(latents_mean=mean, latents_std=std)
    pipe._vae_latents_mean = torch.tensor(mean, dtype=vae.dtype)
    pipe._vae_latents_inv_std = 1.0 / torch.tensor(std, dtype=vae.dtype)


@lru_cache(maxsize=None)
def _transfer_sample(hint: str):
    """A resolved transfer sample of the tiny profile: the templates and control directive transfer adds."""
    import tempfile

    from cosmos_helpers.specs import Sample

    return Sample.from_dict({"prompt": "-", "num_video_frames_per_chunk": 9, "vision_path": "clip.mp4", hint: {}},
                            base_dir=tempfile.gettempdir(), name="train", check_files=False).resolved(profile="tiny")


@lru_cache(maxsize=None)
def _token_ids(pipe, kind: str, text: str, frames: int, width: int, height: int, fps: float, structured: bool,
               hint: str | None = None) -> tuple[list[int], list[int]]:
    """(prompt ids, unconditioned ids) as inference makes them for this kind of run."""
    if kind == "transfer":
        from cosmos_helpers.specs.transfer import format_transfer_prompt

        prompt, negative = format_transfer_prompt(text, None, _transfer_sample(hint), width, height, frames, fps)
        return transfer_token_ids(pipe, prompt), transfer_token_ids(pipe, negative or "")
    flags = dict(add_resolution_template=not structured, add_duration_template=not structured)
    return pipe.tokenize_prompt(text, None, num_frames=frames, height=height, width=width, fps=fps, **flags)


@dataclass
class Pools:
    """The training set of the transformer stage: scenes per (kind, size), their latents (encoded once), the
    transfer controls' latents, and the token ids of their captions grouped by length (a batch shares a layout)."""

    scenes: dict = field(default_factory=dict)  # (kind, size) -> [Scene]
    latents: dict = field(default_factory=dict)  # (kind, size) -> [N, C, T, H, W] fp16
    controls: dict = field(default_factory=dict)  # (size, hint) -> [N, C, T, H, W] fp16
    captions: dict = field(default_factory=dict)  # (kind, size, style, hint) -> ({length: [(index, ids)]}, uncond)


def caption_pools(pipe, pools: Pools, rng: random.Random, size_of_pool: int = POOL) -> None:
    """Scenes of the training split and the token ids of their captions, sentence and structured."""
    profile = get_profile("tiny")
    fps = profile.defaults("text2video").fps
    phrasing = np.random.default_rng(rng.randrange(2**31))  # the world's captions draw phrasings with numpy
    structured = {}
    for kind in MIXES["balanced"][0]:  # every kind gets a pool, whatever the mix
        frames = _frames(kind, profile)
        for size in (IMAGE_SIZES if kind == "image" else VIDEO_SIZES):
            width, height = size_for(*size)
            scenes = pools.scenes[kind, size] = sample_scenes(size_of_pool, seed=rng.randrange(2**31), split="train",
                                                              frames=frames, width=width, height=height)
            for style, hint in [(s, h) for s in ("plain", "json") for h in (HINTS if kind == "transfer" else [None])]:
                items = defaultdict(list)
                for index, scene in enumerate(scenes):
                    if style == "json":  # a structured caption depends on the scene's attributes only
                        text = structured.get(scene.key) or structured.setdefault(scene.key,
                                                                                  json.dumps(caption_json(scene)))
                    else:
                        text = caption(scene, rng=phrasing)
                    ids, uncond = _token_ids(pipe, kind, text, frames, width, height, fps, style == "json", hint)
                    items[len(ids)].append((index, ids))
                pools.captions[kind, size, style, hint] = (dict(items), uncond)


@torch.no_grad()
def encode_pools(pipe, pools: Pools, device: str, chunk: int = 128) -> None:
    """Render and encode every pool clip (and each transfer clip's controls) once, into normalised latents."""
    pipe.vae.to(device)

    def encode(x: torch.Tensor) -> torch.Tensor:
        return encode_latents(pipe, x).half()

    for (kind, size), scenes in pools.scenes.items():
        width, height = size_for(*size)
        frames = _frames(kind, get_profile("tiny"))
        clips, maps = [], {hint: [] for hint in HINTS}
        for i in range(0, len(scenes), chunk):
            x = render(scenes[i:i + chunk], width=width, height=height, frames=frames, device=device)
            clips.append(encode(x))
            if kind == "transfer":
                uint8 = ((x + 1) * 127.5).round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 4, 1).cpu().numpy()
                for hint, video in world_controls(uint8, kinds=HINTS).items():
                    c = torch.from_numpy(video).to(device).permute(0, 4, 1, 2, 3).float()
                    maps[hint].append(encode(c / 127.5 - 1))
        pools.latents[kind, size] = torch.cat(clips)
        for hint in HINTS if kind == "transfer" else ():
            pools.controls[size, hint] = torch.cat(maps[hint])


def _transformer_batch(pools: Pools, args, rng: random.Random) -> dict:
    """What one step trains on: mode, latents, token ids and (transfer) the control latents, if used."""
    kinds, video_modes = MIXES[args.mix]
    kind = _pick(kinds, rng)
    size = _pick(IMAGE_SIZES if kind == "image" else VIDEO_SIZES, rng)
    style = "json" if rng.random() < JSON_SHARE else "plain"
    hint = rng.choice(HINTS) if kind == "transfer" else None
    by_length, uncond = pools.captions[kind, size, style, hint]
    length = rng.choices(list(by_length), weights=[len(v) for v in by_length.values()])[0]
    chosen = [rng.choice(by_length[length]) for _ in range(args.batch)]
    index = torch.tensor([c[0] for c in chosen])
    unconditioned = rng.random() < UNCOND_SHARE
    with_control = hint is not None and (unconditioned or rng.random() >= NO_CONTROL_SHARE)
    return dict(mode={"image": "text2image", "transfer": "transfer"}.get(kind) or _pick(video_modes, rng),
                ids=[uncond] * args.batch if unconditioned else [c[1] for c in chosen],
                x0=pools.latents[kind, size][index.to(pools.latents[kind, size].device)].float(),
                controls=(pools.controls[size, hint][index.to(args.device)].float(),) if with_control else ())


def train_transformer(pipe, args, rng: random.Random, log: list, deadline: float) -> None:
    """Flow matching on the cached latents, with an exponential moving average of the weights (what ships)."""
    device, transformer = args.device, pipe.transformer.to(args.device).train()
    pools = Pools()
    caption_pools(pipe, pools, rng, args.pool)
    encode_pools(pipe, pools, device)
    log.append({"stage": "data", "clips": sum(len(v) for v in pools.latents.values()),
                "seconds_since_start": round(time.monotonic() - deadline + 60 * args.total_minutes, 1)})
    print(log[-1], flush=True)
    params = [p for n, p in transformer.named_parameters() if not n.startswith("action_")]
    opt = torch.optim.AdamW(params, lr=LR, weight_decay=0.01)
    ema = [p.detach().clone() for p in params]
    fps, layouts = get_profile("tiny").defaults("text2video").fps, {}
    budget = Budget((deadline - time.monotonic()) / 60, args.transformer_steps)
    started = time.monotonic()
    while budget:
        b = _transformer_batch(pools, args, rng)
        x0, controls = b["x0"], b["controls"]
        key = (len(b["ids"][0]), tuple(x0.shape[1:]), b["mode"], len(controls))
        if key not in layouts:
            layouts[key] = layout(pipe, b["ids"][0], tuple(x0.shape[1:]), b["mode"], fps, len(controls))
        sigmas = shifted_sigmas(len(b["ids"]), SHIFT)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda")):
            loss = flow_loss(transformer, torch.tensor(b["ids"], device=device), x0, sigmas, layouts[key],
                             controls=controls, motion_weight=args.motion_weight)
        for group in opt.param_groups:
            group["lr"] = budget.lr(LR, warmup=300)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        with torch.no_grad():
            decay = min(0.999, (1 + budget.done) / (10 + budget.done))
            torch._foreach_lerp_(ema, [p.detach() for p in params], 1 - decay)
        budget.done += 1
        if budget.done % 500 == 0 or not budget:
            log.append({"stage": "transformer", "step": budget.done, "loss": round(loss.item(), 5),
                        "seconds": round(time.monotonic() - started, 1)})
            print(log[-1], flush=True)
    with torch.no_grad():
        for p, e in zip(params, ema):
            p.copy_(e)
    transformer.eval()


def model_card(args, log: list, seconds: float) -> str:
    import diffusers
    import transformers

    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor() or "cpu"
    last = {stage: next((e for e in reversed(log) if e["stage"] == stage and "loss" in e), None)
            for stage in ("vae", "transformer")}
    if last["vae"] is None:
        vae = f"- VAE: kept from `{args.init}` ({_recipe_of(args.init)})"
    else:
        vae = (f"- VAE: {last['vae']['step']} steps, final loss {last['vae']['loss']}, held-out reconstruction "
               f"{next(e['heldout_psnr'] for e in log if 'heldout_psnr' in e)} dB PSNR")
    init = f" --init {args.init.name}" if args.init is not None else ""
    return "\n".join([
        "# tiny-cosmos3-world", "",
        "The embedded tiny Cosmos3 (diffusers `Cosmos3OmniTransformer` + Wan2.2-layout `AutoencoderKLWan`, configs "
        "in `cosmos_helpers/models/tiny_trained.py`) trained on the synthetic world of `cosmos_helpers.world` "
        "(coloured balls and boxes moving left, right, up or down over three floors). Action heads and the audio "
        "tokenizer are not trained (they come from the builder's seed).", "",
        "## Recipe", "",
        f"- command: `python scripts/train_tiny.py --out OUT{init} --seed {args.seed} --vae-minutes "
        f"{args.vae_minutes} --total-minutes {args.total_minutes} --vae-batch {args.vae_batch} --batch {args.batch} "
        f"--pool {args.pool} --mix {args.mix} --motion-weight {args.motion_weight}`",
        f"- data seed {args.seed}: training split only (held-out attribute combinations and phrasings never seen)",
        vae,
        f"- transformer: {last['transformer']['step']} steps, final flow loss {last['transformer']['loss']}",
        f"- device: {device}; wall time {seconds / 60:.1f} min; torch {torch.__version__}, diffusers "
        f"{diffusers.__version__}, transformers {transformers.__version__}",
        "- weights: fp16 safetensors; the step log is `training_log.json`", ""])


def _recipe_of(weights: Path) -> dict:
    """The recipe a weights file was made with, and its hash: what a continued run started from."""
    from safetensors import safe_open

    with safe_open(str(weights), framework="pt") as f:
        recipe = json.loads(f.metadata()["recipe"])
    return {"sha256": tiny_trained.weights_digest(weights), **recipe}


def main(argv=None) -> None:
    args = parse_args(argv)
    started = time.monotonic()
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    rng, log = random.Random(args.seed), []
    deadline = started + 60 * args.total_minutes - 20  # leave time to save
    if args.init is not None:  # continue: the transformer was trained on this VAE's latents, so it stays
        if args.vae_minutes:
            raise SystemExit("--init keeps the VAE of the weights file: pass --vae-minutes 0.")
        pipe = tiny_trained.build_trained_pipeline(args.init, seed=args.seed)
    else:
        pipe = tiny_trained.build_untrained(args.seed)
        train_vae(pipe, args, rng, log)
        set_latent_stats(pipe, args, rng)
    pipe.vae.requires_grad_(False)
    train_transformer(pipe, args, rng, log, deadline)
    seconds = time.monotonic() - started
    args.out.mkdir(parents=True, exist_ok=True)
    steps = {e["stage"]: e["step"] for e in log if "step" in e}
    recipe = {"seed": args.seed, "steps": steps, "mix": args.mix, "motion_weight": args.motion_weight}
    if args.init is not None:
        recipe["init"] = _recipe_of(args.init)
    weights = tiny_trained.save_weights(pipe.to("cpu"), args.out / tiny_trained.WEIGHTS.name, recipe)
    (args.out / "MODEL_CARD.md").write_text(model_card(args, log, seconds))
    (args.out / "training_log.json").write_text(json.dumps(log, indent=1) + "\n")
    print(f"wrote {weights} ({weights.stat().st_size / 1e6:.2f} MB) in {seconds / 60:.1f} min")


if __name__ == "__main__":
    main()
