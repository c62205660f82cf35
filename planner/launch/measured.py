"""Measure a run: step times, tokens/s and per-rank memory, and write the profile JSON (torch).

Memory on GPU is ``torch.cuda.max_memory_allocated``. On CPU there is no allocator counter
(``torch.cuda.memory_allocated`` silently returns 0), so memory is counted from tensors: distinct
storages of parameters, gradients and optimizer state (DTensors by their local shard), and saved
activations recorded with ``saved_tensors_hooks`` (torch_cpu_notes.md, "Measuring memory"). Tensors
saved inside activation-checkpoint regions are invisible to outer hooks, so with recompute on the
activation count shows what stays saved between forward and backward: the checkpoint's inputs, and under
selective recompute the op outputs its policy keeps, which the policy reports (`count_kept`). Frees are not
tracked, so under a pipeline schedule (tracked over the whole step) the count is an upper bound: the sum over
micro-batches.
"""

from __future__ import annotations

import os
import statistics
from contextlib import contextmanager

import torch
from torch import nn

from planner.launch import machine


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def _storage_bytes(tensors) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        if t is None:
            continue
        s = _local(t).untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def model_state_bytes(parts: list[nn.Module], optims: list[torch.optim.Optimizer]) -> dict[str, int]:
    params = [p for m in parts for p in m.parameters()]
    opt_state = [v for o in optims for st in o.state.values() for v in st.values() if torch.is_tensor(v)]
    return {
        "params_bytes": _storage_bytes(params),
        "grads_bytes": _storage_bytes(p.grad for p in params),
        "optimizer_bytes": _storage_bytes(opt_state),
    }


# Autograd nodes that only cast, transpose or reshape their one input: a weight seen through them is
# still a weight (autocast's bf16 copy of an fp32 parameter, the transposed weight a linear saves).
_WEIGHT_VIEWS = frozenset(
    {
        "ToCopyBackward0",
        "TBackward0",
        "ViewBackward0",
        "TransposeBackward0",
        "PermuteBackward0",
        "AliasBackward0",
        "UnsafeViewBackward0",
    }
)


def is_weight(t: torch.Tensor, max_hops: int = 6) -> bool:
    """A parameter, or a cast/view of one (FSDP2's unsharded copy, autocast's cast), not an activation.

    FSDP2's unsharded parameters are freed after forward by resizing their storage, and autocast's
    casts are weights in another dtype: neither is activation memory, though autograd saves both.
    """
    if t.grad_fn is None:
        return isinstance(t, nn.Parameter)
    fn = t.grad_fn
    for _ in range(max_hops):
        name = type(fn).__name__
        if name == "AccumulateGrad":
            return isinstance(getattr(fn, "variable", None), nn.Parameter)
        inputs = [f for f, _ in fn.next_functions if f is not None]
        if name not in _WEIGHT_VIEWS or len(inputs) != 1:
            return False
        fn = inputs[0]
    return False


class ActivationCounter:
    """Peak bytes of tensors autograd saved for backward (weights and their casts excluded), over a step, and of
    the outputs a selective-checkpoint policy keeps (`count_kept`)."""

    def __init__(self, parts: list[nn.Module]):
        self.param_ptrs = {_local(p).untyped_storage().data_ptr() for m in parts for p in m.parameters()}
        self.live: dict[int, int] = {}
        self.total = 0
        self.peak = 0

    def add(self, t: torch.Tensor) -> None:
        """Count a saved tensor's storage once, unless it is a weight's."""
        try:
            s = _local(t).untyped_storage()
            ptr = s.data_ptr()
            if ptr not in self.live and ptr not in self.param_ptrs and not is_weight(t):  # each storage once
                self.live[ptr] = s.nbytes()
                self.total += self.live[ptr]
                self.peak = max(self.peak, self.total)
        except (RuntimeError, NotImplementedError):
            pass

    @contextmanager
    def track(self):
        self.live, self.total = {}, 0

        def pack(t: torch.Tensor):
            self.add(t)
            return t

        _TRACKING.append(self)
        try:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                yield
        finally:
            _TRACKING.remove(self)


_TRACKING: list[ActivationCounter] = []  # the counter of the step under way, if one is counting


def count_kept(output: object) -> None:
    """The tensors of an op output a selective-checkpoint policy keeps for backward: the checkpoint holds them in its
    own cache, not through autograd's saved tensors, so the hooks never see them (launch/parallelize.py calls this
    from its policy in the forward)."""
    if not _TRACKING:
        return
    for t in torch.utils._pytree.tree_leaves(output):
        if isinstance(t, torch.Tensor):
            _TRACKING[-1].add(t)


def _quantile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated quantile of sorted values (numpy's default; planner.calibrate uses the same)."""
    pos = q * (len(sorted_values) - 1)
    i = int(pos)
    j = min(i + 1, len(sorted_values) - 1)
    return sorted_values[i] + (pos - i) * (sorted_values[j] - sorted_values[i])


def ranks_per_core(device_type: str) -> float:
    """How many of this node's ranks shared each CPU core (torchrun's LOCAL_WORLD_SIZE over the cores this process
    may run on), 1 where each had its own or on GPUs: calibrate reads a step of time-shared ranks as one with a
    core each, as launch prices it (launch/runner.py shared_cores)."""
    if device_type != "cpu":
        return 1.0
    return machine.ranks_per_core(int(os.environ.get("LOCAL_WORLD_SIZE", "1")), machine.usable_cores())


def summarize(step_times: list[float], warmup: int, tokens_per_step: int) -> dict:
    """Step times and their statistics; None where there is no step to time (a restart that resumed at the last
    step): JSON has no NaN, and a profile that holds one is not JSON."""
    timed = step_times[warmup:] or step_times
    median = statistics.median(timed) if timed else None
    return {
        "step_times_s": [{"step": i + 1, "time_s": t, "warmup": i < warmup} for i, t in enumerate(step_times)],
        "median_step_s": median,
        # Low quantiles of the timed steps: on a shared machine other load only ever slows a step down, so
        # these repeat across runs better than the median (`planner.calibrate.step_stat` can fit to them).
        "p25_step_s": _quantile(sorted(timed), 0.25) if timed else None,
        "min_step_s": min(timed) if timed else None,
        "tokens_per_s": tokens_per_step / median if median else None,
    }
