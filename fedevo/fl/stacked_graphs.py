"""Captured CUDA graphs of the stacked trainer's buckets (fl/stacked.py).

On CUDA the steps of a bucket whose shapes recur (the same clients count, widths and schedule lengths: a round
repeated, a fixed cohort) replay as one captured CUDA graph: one launch for the whole local training instead of ~25
per step (`FEDEVO_CUDA_GRAPHS=0` turns it off). A run's bucket is to recur where every member has GRAPH_ROUNDS
rounds left or more (`recurs`); its shapes are then rounded up (`padded_clients`, SAMPLE_QUANTUM) so that the
arrivals' varying counts fall on a few shapes. Buckets with a per-step hook run eagerly (its Python state changes
every step). The cache (`cache(device)`) keeps the most recent graphs within a quarter of the device's memory.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from typing import Callable, Optional, Sequence

import torch

from .. import hardware
from . import tf32
from .local_round import LocalRound
from .stacked_settings import graphs_enabled


#: a bucket whose every member has at least this many rounds left (this one included) trains in a captured CUDA
#: graph: seen once eagerly, captured the next time (a capture costs about two eager runs), replayed in the rounds
#: after; with fewer rounds left the capture would not pay back, and the bucket runs eagerly (`recurs`)
GRAPH_ROUNDS = 6
#: such a bucket's client count rounded up by at most 1/CLIENT_SLACK of itself (`padded_clients`: clients with no
#: sample): the clients who arrive vary from round to round, and an unrounded count would make a new graph nearly
#: every round
CLIENT_SLACK = 8
#: and each step's computed samples (the most any client has) rounded up to a multiple of this: clients whose
#: sizes differ by a sample (an IID split of N among K) would otherwise change a step's shape with the arrivals
SAMPLE_QUANTUM = 8


def padded_clients(real: int) -> int:
    """`real` rounded up to a multiple of the largest power of two ≤ real / CLIENT_SLACK (at least 1): at most
    1/CLIENT_SLACK more clients, and a few counts for a bucket's varying arrivals to fall on (70 ± 5 → 72 or 80)."""
    q = 1 << max(0, (max(int(real), 1) // CLIENT_SLACK).bit_length() - 1)
    return -(-int(real) // q) * q


def recurs(members: Sequence[LocalRound]) -> Optional[bool]:
    """Whether the members' bucket is to recur: True where every member has GRAPH_ROUNDS rounds left or more (its
    shapes rounded up, `_Bucket`; its graph captured on the next sighting), False where one has fewer (eager,
    unrounded: a 5-round generation captures nothing), None where a member does not say (a caller's own repeated
    call, as a benchmark's: captured the second time its shape comes, unrounded)."""
    left = [m.rounds_left for m in members]
    if any(n is None for n in left):
        return None
    return min(left) >= GRAPH_ROUNDS


class GraphCache:
    """Captured CUDA graphs of buckets' step loops, by shape signature: captured the second time a signature
    comes where the bucket is to recur (`recurs`: not False), replayed after; the most recent kept, at most `size`
    and at most a quarter of the device's memory in their states (each graph's private pool of intermediates comes on
    top: a step's activations, less than its state for the stacked MLPs)."""

    def __init__(self, size: int = 32):  # a 30-round generation's 9 buckets hold ~25 shapes between them
        self.size = size
        self.seen: set = set()
        self.graphs: OrderedDict = OrderedDict()

    def run(self, bucket, x: torch.Tensor, before_capture: Optional[Callable[[], None]] = None) -> dict:
        """before_capture: called before a capture, where the caller's other threads must have stopped using the
        GPU (a capture fails where another thread synchronises with the device meanwhile). An eager run or a
        capture is inside the bucket's TF32 window (`tf32.window`); a replay needs none: its TF32 or not is in
        the captured graph."""
        key = (bucket.key(), x.data_ptr(), x.shape)
        hit = self.graphs.get(key)
        if hit is not None:
            self.graphs.move_to_end(key)
            graph, state = hit
            bucket.load(state)
            graph.replay()
            return state
        state: dict = {}
        bucket.load(state)
        cuda = bucket.device.type == "cuda"
        capture = (cuda and key in self.seen and graphs_enabled() and bucket.recurs is not False
                   and not bucket.hooked)  # a hook's Python state changes every step (its norms, its noise's
        # counters): hooked buckets run eagerly
        if capture and before_capture is not None:
            before_capture()  # before the window: a thread waiting for it could not end while it is open
        with tf32.window(bucket.tf32) if cuda else contextlib.nullcontext():
            return self._run_new(bucket, x, key, state, capture)

    def _run_new(self, bucket, x: torch.Tensor, key: tuple, state: dict, capture: bool) -> dict:
        """A signature not captured yet: eager the first time (or without CUDA graphs), else captured."""
        if not capture:
            self.seen.add(key)
            bucket.run(state, x)
            return state
        side = torch.cuda.Stream(bucket.device)  # warm-up on a side stream, as capture requires
        side.wait_stream(torch.cuda.current_stream(bucket.device))
        snapshot = {k: v.clone() for k, v in state.items()}
        with torch.cuda.stream(side):
            bucket.run(state, x)
        torch.cuda.current_stream(bucket.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            bucket.run(state, x)
        for k, v in snapshot.items():  # capture ran nothing; the warm-up trained once: start over
            state[k].copy_(v)
        graph.replay()
        self.graphs[key] = (graph, state)
        self.evict(memory_of(bucket.device) // 4)
        return state

    def evict(self, budget: int) -> None:
        """Drop the least recently used graphs beyond `size`, or while their states hold more than `budget` bytes
        (the newest is kept)."""
        while len(self.graphs) > self.size or (len(self.graphs) > 1 and sum(
                state_bytes(st) for _, st in self.graphs.values()) > budget):
            self.graphs.popitem(last=False)


def state_bytes(state: dict) -> int:
    """The bytes a bucket's state holds, each storage once (with the biases inside the weights, fl/stacked_bias.py,
    its weights and biases are views of its layers' matrices)."""
    seen: dict = {}
    for t in state.values():
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def memory_of(device: torch.device) -> int:
    """The device's memory in bytes this process's share holds (CUDA: `hardware.gpu_total`), else no limit."""
    if device.type != "cuda":
        return 1 << 62
    return hardware.gpu_total(device)


CACHES: dict = {}


def cache(device: torch.device) -> GraphCache:
    return CACHES.setdefault(str(device), GraphCache())


__all__ = ["CLIENT_SLACK", "GRAPH_ROUNDS", "GraphCache", "SAMPLE_QUANTUM", "cache", "padded_clients", "recurs"]
