"""How one Diffusers generation is spread over several GPUs, in ``serve_command``'s words (``cfg_parallel=``:
vLLM-Omni's ``--cfg-parallel-size``, the two guidance passes at once on two GPU groups; ``ulysses=``:
``--ulysses-degree``, each pass's tokens in N slices, attention swapping slices for heads), so a plan moves between
the two unchanged. Tensor parallelism is vLLM-Omni's alone (Diffusers has no sharded Cosmos3 layers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....errors import ValidationError


@dataclass(frozen=True)
class ParallelPlan:
    """Degrees of one multi-GPU plan; :meth:`build` is the validated way to make one."""

    gpus: int = 1
    cfg_parallel: int = 1
    ulysses: int = 1

    @classmethod
    def build(cls, gpus: int | None = None, *, cfg_parallel: int | None = None, ulysses: int | None = None,
              tensor_parallel: int | None = None) -> "ParallelPlan":
        """The degrees validated (``serve_command``'s rules; their product is ``gpus``: an idle GPU would be a silent
        waste) and the unset ones filled: CFG-parallel takes two GPUs first (it halves the work without communication
        inside a pass), Ulysses the rest (``gpus=4``: 2 x 2)."""
        given = {"gpus": gpus, "cfg_parallel": cfg_parallel, "ulysses": ulysses, "tensor_parallel": tensor_parallel}
        for name, value in given.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValidationError(name, f"expected a positive integer, got {value!r}.", f"pass e.g. {name}=2.")
        if tensor_parallel not in (None, 1):
            raise ValidationError("tensor_parallel", "Diffusers has no tensor-parallel Cosmos3 layers; only the "
                                  "vLLM-Omni server splits weights across GPUs.",
                                  "use cfg_parallel=2 and/or ulysses=N here, or serve_command(..., "
                                  f"tensor_parallel={tensor_parallel}) with VllmOmniBackend.")
        if cfg_parallel not in (None, 1, 2):
            raise ValidationError("cfg_parallel", "CFG parallelism splits the two guidance branches, so it is 1 or "
                                  f"2, got {cfg_parallel}.", "use cfg_parallel=2 (or leave it out).")
        if gpus is None:
            gpus = (cfg_parallel or 1) * (ulysses or 1)
        if cfg_parallel is None and ulysses is None:
            cfg_parallel = 2 if gpus % 2 == 0 else 1
        if cfg_parallel is None:
            cfg_parallel = gpus // ulysses if gpus % ulysses == 0 and gpus // ulysses <= 2 else 1
        if ulysses is None:
            ulysses = gpus // cfg_parallel if gpus % cfg_parallel == 0 else 1
        cfg, sp = cfg_parallel, ulysses
        if cfg * sp != gpus:
            culprit = next((n for n in ("ulysses", "cfg_parallel") if given[n] not in (None, 1)), "gpus")
            raise ValidationError(culprit, f"cfg_parallel x ulysses = {cfg} x {sp} = {cfg * sp} GPUs per request, "
                                  f"but gpus={gpus}.", f"choose degrees whose product is {gpus}, e.g. "
                                  f"cfg_parallel=2, ulysses={max(gpus // 2, 1)}; or set gpus={cfg * sp}.")
        return cls(gpus=gpus, cfg_parallel=cfg, ulysses=sp)

    @property
    def parallel(self) -> bool:
        return self.gpus > 1

    def serve_kwargs(self) -> dict[str, Any]:
        """The same plan as ``serve_command`` arguments: ``serve_command(model, **plan.serve_kwargs())``."""
        return {"gpus": self.gpus, "cfg_parallel": self.cfg_parallel, "ulysses": self.ulysses}

    def rank_groups(self) -> tuple[list[list[int]], list[list[int]]]:
        """(Ulysses groups, CFG groups) of global ranks: rank = branch * ulysses + slice."""
        ulysses = [[c * self.ulysses + u for u in range(self.ulysses)] for c in range(self.cfg_parallel)]
        cfg = [[c * self.ulysses + u for c in range(self.cfg_parallel)] for u in range(self.ulysses)]
        return ulysses, cfg

    def check_placement(self, device: str | None, device_map: Any) -> None:
        """Workers take GPUs 0..gpus-1 of the visible ones; refuse placements they could not honour."""
        if device_map is not None:
            raise ValidationError("device_map", f"gpus={self.gpus} runs one worker per GPU, each holding the whole "
                                  "pipeline, so a device_map has nothing to place.", "drop device_map, or use gpus=1.")
        if device is not None and device not in ("cuda", "cpu"):
            raise ValidationError("device", f"gpus={self.gpus} uses GPUs 0..{self.gpus - 1}; device={device!r} names "
                                  "one.", "pass device='cuda' and pick the GPUs with CUDA_VISIBLE_DEVICES.")
        import torch

        if (device or ("cuda" if torch.cuda.is_available() else "cpu")) == "cuda":
            available = torch.cuda.device_count()
            if self.gpus > available:
                raise ValidationError("gpus", f"gpus={self.gpus}, but only {available} CUDA GPUs are visible.",
                                      f"use gpus={available} or fewer (or device='cpu' to try the plan on CPU).")

    def check_model(self, config: Any) -> None:
        """Refuse a Ulysses degree the transformer's heads cannot be split by (before any generation)."""
        heads = int(config["num_attention_heads"] if isinstance(config, dict) else config.num_attention_heads)
        if heads % self.ulysses:
            divisors = [d for d in range(1, heads + 1) if heads % d == 0]
            raise ValidationError("ulysses", f"Ulysses gives every GPU heads / ulysses attention heads, and this "
                                  f"transformer has {heads} heads, which {self.ulysses} does not divide.",
                                  f"use ulysses in {divisors}.")

    def check_request(self, request: Any) -> None:
        """CFG-parallel needs a negative pass to run next to the conditional one."""
        if self.cfg_parallel > 1 and float(request.guidance_scale) == 1.0:
            raise ValidationError("guidance_scale", "guidance_scale=1 runs no negative pass, so cfg_parallel=2 "
                                  "would leave half the GPUs idle.",
                                  "raise guidance_scale (e.g. 6.0), or use DiffusersBackend(gpus=..., ulysses=...) "
                                  "without cfg_parallel.")

