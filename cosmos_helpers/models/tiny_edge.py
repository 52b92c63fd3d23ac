"""The embedded tiny Cosmos3 with the *Edge* backbone, for CPU runs and CI of the Edge profile: random weights.

Edge's language backbone is Nemotron dense (vLLM-Omni ``transformer_cosmos3_edge.py:27``), which diffusers 0.42.1's
``Cosmos3OmniTransformer`` builds from ``hidden_act="relu2"`` (``transformer_cosmos3.py:182-192, :322``). Only the
transformer differs from :mod:`cosmos_helpers.models.tiny`.
"""

from __future__ import annotations

from pathlib import Path

from .tiny import TINY_FORMAT_VERSION, TRANSFORMER_CONFIG, build_tiny_pipeline, cache_root, cached_build

MODEL_NAME = "tiny-edge"
# fw inference/configs/model/Cosmos3-Edge.yaml: qk_norm_for_text false, use_und_k_norm_for_gen true, sound_gen false
EDGE_TRANSFORMER: dict = {**TRANSFORMER_CONFIG, "hidden_act": "relu2", "qk_norm_for_text": False,
                          "use_und_k_norm_for_gen": True, "sound_gen": False}


def tiny_edge_path(seed: int = 0, root: str | Path | None = None) -> Path:
    """The folder of the tiny Edge model for ``seed``, built on first use."""
    target = cache_root(root) / f"tiny-cosmos3-edge-v{TINY_FORMAT_VERSION}-seed{seed}"
    return cached_build(target, "model_index.json",
                        lambda staging: build_tiny_edge_pipeline(seed).save_pretrained(staging))


def build_tiny_edge_pipeline(seed: int = 0):
    """The tiny pipeline with the Edge transformer and no sound tokenizer (fp32, eval mode, no guardrails)."""
    import torch
    from diffusers import Cosmos3OmniPipeline, Cosmos3OmniTransformer
    base = build_tiny_pipeline(seed)
    torch.manual_seed(seed)
    transformer = Cosmos3OmniTransformer(**EDGE_TRANSFORMER).eval()
    return Cosmos3OmniPipeline(transformer=transformer, text_tokenizer=base.text_tokenizer, vae=base.vae,
                               scheduler=base.scheduler, sound_tokenizer=None, safety_checker=None,
                               enable_safety_checker=False)
