"""The embedded tiny Cosmos3 as a *distilled* checkpoint, for CPU runs and CI of the few-step path: random weights.

The :mod:`.tiny` weights as diffusers 0.42.1 expects a distilled checkpoint: a modular ``Cosmos3DistilledBlocks``
pipeline whose ``modular_model_index.json`` carries the fixed schedule (``distilled_sigmas``) and a stochastic
``FlowMatchEulerDiscreteScheduler`` at shift 1, as the framework's converter exports one (``protocol.variants``).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..protocol import variants
from .tiny import TINY_FORMAT_VERSION, build_tiny_pipeline, cache_root, cached_build

MODEL_NAME = "tiny-distilled"
INDEX_FILE = "modular_model_index.json"


def tiny_distilled_path(seed: int = 0, root: str | Path | None = None) -> Path:
    """The folder of the tiny distilled model for ``seed``, built on first use."""
    target = cache_root(root) / f"tiny-cosmos3-distilled-v{TINY_FORMAT_VERSION}-seed{seed}"

    def write(staging: Path) -> None:
        as_distilled(build_tiny_pipeline(seed)).save_pretrained(str(staging), overwrite_modular_index=True)
        # components load from the folder itself (no absolute build path), so it can move and is the same anywhere
        index = json.loads((staging / INDEX_FILE).read_text())
        for value in index.values():
            if isinstance(value, list) and len(value) == 3 and isinstance(value[2], dict):
                value[2]["pretrained_model_name_or_path"] = None
        (staging / INDEX_FILE).write_text(json.dumps(index))

    return cached_build(target, INDEX_FILE, write)


def as_distilled(base, sigmas: tuple[float, ...] = variants.DISTILLED_T_LIST):
    """A distilled modular pipeline over ``base``'s tokenizer, VAE and transformer (shared, not copied), with the
    exported checkpoints' scheduler and the fixed schedule ``sigmas`` (benchmarks time it on Nano-shaped weights)."""
    from diffusers import FlowMatchEulerDiscreteScheduler
    from diffusers.modular_pipelines import Cosmos3DistilledBlocks
    pipe = Cosmos3DistilledBlocks().init_pipeline()
    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=variants.DISTILLED_SHIFT,
                                                stochastic_sampling=variants.DISTILLED_SAMPLE_TYPE == "sde")
    pipe.update_components(text_tokenizer=base.text_tokenizer, vae=base.vae, transformer=base.transformer,
                           scheduler=scheduler)
    pipe.register_to_config(distilled_sigmas=[float(s) for s in sigmas], enable_safety_checker=False)
    return pipe

