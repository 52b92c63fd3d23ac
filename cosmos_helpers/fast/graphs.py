"""CUDA graphs for the generation stack: one launch per pass instead of ~2,000 small kernels (at text-to-image sizes
their launches cost more than their work). Captured per shape signature at its second pass (the first runs eagerly
and picks the attention kernels), replayed across calls (buffers recycled by shape), one memory pool, least recently
used beyond ``max_graphs`` dropped; a failed capture runs eagerly.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, NamedTuple

import torch


class _Captured(NamedTuple):
    graph: Any
    inputs: tuple
    output: Any
    buffers: list  # KVBuffers the graph reads/writes: keeps them alive


class GraphCache:
    def __init__(self, max_graphs: int = 8, max_tokens: int | None = None) -> None:
        self.max_graphs, self.max_tokens = max_graphs, max_tokens
        self.graphs: "OrderedDict[tuple, _Captured]" = OrderedDict()
        self.seen: set[tuple] = set()
        self.failed: dict[tuple, str] = {}
        self.pool = None
        self.captures = self.replays = 0

    def clear(self) -> None:
        self.graphs.clear()
        self.seen.clear()

    def forget_buffer(self, buf) -> None:
        for key in [key for key, cap in self.graphs.items() if any(b is buf for b in cap.buffers)]:
            del self.graphs[key]
        self.seen = {key for key in self.seen if id(buf) not in key[0]}

    def run(self, key: tuple, fn: Callable, inputs: tuple[torch.Tensor, ...], buffers: list, n_tokens: int):
        """``fn(*inputs)`` -> tensor, through a CUDA graph when possible. ``key[0]`` holds the buffer ids."""
        if (key in self.failed or (self.max_tokens is not None and n_tokens > self.max_tokens)
                or not inputs[0].is_cuda):
            return fn(*inputs)
        captured = self.graphs.get(key)
        if captured is None:
            if key not in self.seen:
                self.seen.add(key)
                return fn(*inputs)  # first time: eager (also selects attention kernels outside capture)
            captured = self._capture(key, fn, inputs, buffers)
            if captured is None:
                return fn(*inputs)
        else:
            self.graphs.move_to_end(key)
        for static, value in zip(captured.inputs, inputs):
            static.copy_(value)
        captured.graph.replay()
        self.replays += 1
        return captured.output

    def _capture(self, key, fn, inputs, buffers):
        try:
            static_inputs = tuple(x.clone() for x in inputs)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up on the capture stream's sibling (cuBLAS/cuDNN workspaces)
                fn(*static_inputs)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            if self.pool is None:
                self.pool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                output = fn(*static_inputs)
            captured = _Captured(graph, static_inputs, output, list(buffers))
        except Exception as exc:  # keep generating: this signature just runs eagerly
            self.failed[key] = f"{type(exc).__name__}: {exc}"
            torch.cuda.synchronize()
            return None
        self.graphs[key] = captured
        self.captures += 1
        while len(self.graphs) > self.max_graphs:
            self.graphs.popitem(last=False)
        return captured
