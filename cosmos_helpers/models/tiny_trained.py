"""The default ``tiny`` model: the embedded Cosmos3 trained on the synthetic world (``cosmos_helpers.world``).

The random-weight builder's classes (``models.tiny``), wider, with weights shipped in the package (fp16, under 8 MB;
recipe and data seed in ``weights/MODEL_CARD.md``, training in ``scripts/train_tiny.py``). Only the trained VAE and
transformer ship; the untrained action heads and audio tokenizer come from the builder's seed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from . import tiny

TRANSFORMER_CONFIG: dict[str, Any] = {
    **tiny.TRANSFORMER_CONFIG, "hidden_size": 128, "intermediate_size": 256, "head_dim": 32,
    "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4, "rope_axes_dim": [8, 4, 4],
}
# A small encoder is enough to place a few shapes; the decoder is where the pictures are made.
VAE_CONFIG: dict[str, Any] = {**tiny.VAE_CONFIG, "base_dim": 8, "decoder_base_dim": 16}
WEIGHTS = Path(__file__).parent / "weights" / "tiny-cosmos3-world.safetensors"
TRAINED_PARTS = ("transformer", "vae")


def build_untrained(seed: int = 0):
    """The trained model's architecture with fresh weights: where training starts."""
    return tiny.build_tiny_pipeline(seed, TRANSFORMER_CONFIG, VAE_CONFIG)


def trained_state(pipe: Any) -> dict[str, Any]:
    """The tensors that ship (``part.name`` keys, fp16): everything trained, nothing left at its seed."""
    import torch
    state = {f"vae.{k}": v for k, v in pipe.vae.state_dict().items()}
    state.update({f"transformer.{k}": v for k, v in pipe.transformer.state_dict().items()
                  if not k.startswith("action_")})
    return {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in state.items()}


def save_weights(pipe: Any, path: str | Path, metadata: dict[str, Any]) -> Path:
    """Write :func:`trained_state` plus the VAE's latent statistics (the pipeline normalises with them)."""
    from safetensors.torch import save_file
    stats = {"latents_mean": list(pipe.vae.config.latents_mean), "latents_std": list(pipe.vae.config.latents_std)}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(trained_state(pipe), str(path), metadata={"latent_stats": json.dumps(stats),
                                                        "recipe": json.dumps(metadata, sort_keys=True)})
    return path


def build_trained_pipeline(weights: str | Path = WEIGHTS, seed: int = 0):
    """The trained tiny pipeline in memory (fp32, eval mode): the architecture, then the shipped weights."""
    import torch
    from safetensors import safe_open
    with safe_open(str(weights), framework="pt") as f:
        stats = json.loads(f.metadata()["latent_stats"])
        state = {k: f.get_tensor(k).to(torch.float32) for k in f.keys()}
    pipe = tiny.build_tiny_pipeline(seed, TRANSFORMER_CONFIG, {**VAE_CONFIG, **stats})
    for part in TRAINED_PARTS:
        prefix = f"{part}."
        module = getattr(pipe, part)
        given = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        expected = {k: v.shape for k, v in module.state_dict().items() if not k.startswith("action_")}
        reshaped = {k for k in given if k in expected and given[k].shape != expected[k]}
        wrong = sorted(set(expected) ^ set(given) | reshaped)
        if wrong:  # checked here so the message names the file and the fix, not a shape deep in torch
            raise ValueError(f"{weights} does not match the tiny {part} ({len(wrong)} tensors differ, e.g. "
                             f"{wrong[:3]}); rebuild it with scripts/train_tiny.py.")
        module.load_state_dict(given, strict=False)
    return pipe


def weights_digest(weights: str | Path) -> str:
    """The first 12 hex digits of a weights file's sha256: names its built folder and its place in a recipe chain."""
    return hashlib.sha256(Path(weights).read_bytes()).hexdigest()[:12]


def trained_tiny_path(root: str | Path | None = None, weights: str | Path = WEIGHTS) -> Path:
    """The trained tiny model's folder, built from the shipped weights on first use (named by their hash)."""
    target = tiny.cache_root(root) / f"tiny-cosmos3-world-{weights_digest(weights)}"
    return tiny.cached_build(target, "model_index.json",
                             lambda staging: build_trained_pipeline(weights).save_pretrained(staging))
