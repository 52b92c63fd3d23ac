"""One matrix product for q/k/v and one for gate/up per generation layer, without a second copy of the weights: the
layers' weights become slices of the stacked one. Stacked is not always faster (H200 gate/up: 11.3 against 12.1 ms at
480p, 1.74 against 1.63 ms at 256p), so on CUDA each token count is timed once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .attention import cuda_ms


@dataclass
class _Stack:
    """Linears ``parts`` whose weights (and biases) are row slices of ``weight`` (``bias``)."""

    parts: tuple[torch.nn.Linear, ...]
    weight: torch.Tensor
    bias: torch.Tensor | None
    sizes: list[int]

    @classmethod
    def build(cls, parts: tuple[torch.nn.Linear, ...]) -> "_Stack | None":
        weights, biases = [p.weight for p in parts], [p.bias for p in parts]
        if (len({(w.device, w.dtype, w.shape[1]) for w in weights}) != 1 or weights[0].device.type == "meta"
                or len({b is None for b in biases}) != 1):  # one layout, and every part with a bias or none
            return None
        sizes = [w.shape[0] for w in weights]
        with torch.no_grad():
            weight = torch.cat([w.detach() for w in weights])
            bias = None if biases[0] is None else torch.cat([b.detach() for b in biases])
            stack = cls(parts, weight, bias, sizes)
            for tensor, view in stack._slices():
                tensor.data = view
        return stack

    def _slices(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(each part's weight or bias, the row slice it should be)."""
        pairs = list(zip([p.weight for p in self.parts], self.weight.split(self.sizes)))
        if self.bias is not None:
            pairs += zip([p.bias for p in self.parts], self.bias.split(self.sizes))
        return pairs

    def intact(self) -> bool:
        """Each part still reads its slice of the stacked weight (nothing moved or replaced it)."""
        return all(tensor.data_ptr() == view.data_ptr() for tensor, view in self._slices())

    def unfuse(self) -> None:
        with torch.no_grad():
            for tensor, view in self._slices():
                if tensor.untyped_storage().data_ptr() == view.untyped_storage().data_ptr():
                    tensor.data = tensor.data.clone()

    def __call__(self, x: torch.Tensor, fused: bool) -> tuple[torch.Tensor, ...]:
        if fused:
            return F.linear(x, self.weight, self.bias).split(self.sizes, dim=-1)
        return tuple(part(x) for part in self.parts)


class FusedProjections:
    """Per generation layer: the q/k/v stack and (SiLU MLPs) the gate/up stack."""

    def __init__(self, transformer) -> None:
        self.transformer = transformer
        self.qkv: list[_Stack] = []
        self.gate_up: list[_Stack | None] = []
        self.choices: dict[tuple, dict[str, bool]] = {}  # (tokens, dtype, device) -> {"qkv": .., "gate_up": ..}
        self.refreshes = 0
        self.refresh()

    @property
    def available(self) -> bool:
        return len(self.qkv) == len(self.transformer.layers)

    def refresh(self) -> bool:
        """Stack again if weights were moved or replaced since the last call. Returns ``available``."""
        if self.available and all(s.intact() for s in self.qkv) and all(s is None or s.intact() for s in self.gate_up):
            return True
        self.qkv, self.gate_up = [], []
        for layer in self.transformer.layers:
            attn, mlp = layer.self_attn, layer.mlp_moe_gen
            qkv = _Stack.build((attn.add_q_proj, attn.add_k_proj, attn.add_v_proj))
            if qkv is None:
                self.qkv, self.gate_up = [], []
                return False
            self.qkv.append(qkv)
            gate = getattr(mlp, "gate_proj", None)
            self.gate_up.append(_Stack.build((gate, mlp.up_proj)) if gate is not None else None)
        self.refreshes += 1
        self.choices.clear()
        return True

    def unfuse(self) -> None:
        """Each layer's weights in their own storage again (``save_pretrained``)."""
        for stack in (*self.qkv, *self.gate_up):
            if stack is not None:
                stack.unfuse()
        self.qkv, self.gate_up = [], []

    def choice(self, x: torch.Tensor) -> dict[str, bool]:
        """Fused or separate products for this many tokens: timed once per size on CUDA, fused on CPU."""
        key = (x.shape[0], x.dtype, x.device)
        if key in self.choices:
            return self.choices[key]
        if x.is_cuda and torch.cuda.is_current_stream_capturing():
            return {"qkv": True, "gate_up": True}
        if x.is_cuda:
            probe = torch.randn_like(x)
            picked = {"qkv": _faster(self.qkv[0], probe),
                      "gate_up": self.gate_up[0] is not None and _faster(self.gate_up[0], probe)}
        else:
            picked = {"qkv": True, "gate_up": self.gate_up[0] is not None}
        self.choices[key] = picked
        return picked


def _faster(stack: _Stack, x: torch.Tensor, repeats: int = 5) -> bool:
    """Whether the stacked product beats the separate ones on ``x`` (best of ``repeats``)."""
    best = {}
    for fused in (True, False):
        stack(x, fused)  # warm-up: cuBLAS heuristics and workspace
        best[fused] = min(cuda_ms(lambda: stack(x, fused)) for _ in range(repeats))
    return best[True] <= best[False]
