"""What one worker rank trains: the model built and parallelized from the plan, its optimizers, and one training
step on synthetic data (torch).

Data is synthetic and a pure function of (seed, step): every layout sees the same global batch, and dp rank r
takes rows [r·B/dp, (r+1)·B/dp).

Context parallelism (cp > 1) runs only on CUDA: the cp ranks of one dp rank take the same rows, and
``torch.distributed.tensor.experimental.context_parallel`` shards their sequence dimension (load-balanced
head-tail chunks when 2·cp divides seq_len) and swaps F.scaled_dot_product_attention for ring attention.
On CPU the worker refuses cp > 1 (torch has no CP rule for the CPU SDPA kernel, torch_cpu_notes.md row 11).
"""

from __future__ import annotations

import argparse
import os
from contextlib import nullcontext
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from planner.io.catalog import load_engine, load_model
from planner.launch.layout import MESH_DIMS, plan_layout
from planner.launch.measured import ActivationCounter
from planner.launch.model import GPT, cross_entropy, init_weights
from planner.launch.parallelize import data_parallel_kind, data_parallel_mesh, mp_dtype, parallelize, uses_autocast
from planner.launch.spec import as_built, shrink
from planner.launch.worker_support import cp_problems, fp8_problems, uses_context_parallel
from planner.plan import Plan

LR, WEIGHT_DECAY = 3e-3, 0.1
CP_ROTATE_METHOD = "allgather"  # torch's default; torchtitan's default too


def synthetic_batch(step: int, *, seed: int, rows: int, seq_len: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Arithmetic token sequences (random start and stride per row): learnable, seeded, layout-independent."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    start = torch.randint(0, vocab, (rows, 1), generator=g)
    stride = torch.randint(1, 8, (rows, 1), generator=g)
    tokens = (start + stride * torch.arange(seq_len + 1)) % vocab
    return tokens[:, :-1], tokens[:, 1:]


class Trainer:
    def __init__(self, args: argparse.Namespace):
        self.args = a = args
        self.plan = Plan(**{k: getattr(a, k) for k in Plan.model_fields})
        p = self.plan
        # the model as built (untied at tp > 1): what the parts hold and the profile records, so a calibration
        # from the profile prices the model that ran
        self.spec = as_built(shrink(load_model(a.model), layers=a.layers, hidden=a.hidden, tp=p.tp), p)
        # The engine profile decides how the ZeRO stage runs and when gradients are reduced; the cost model
        # prices the run with the same profile.
        self.zero_stage = load_engine(a.engine).zero_stage(p)
        cuda = torch.cuda.is_available()  # from the environment; --hardware is only a label
        self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
        # Refuse before any process group exists: cp > 1 on CPU raises here with the reason.
        self.cp_active = uses_context_parallel(p.cp, self.device.type)
        if self.cp_active and (problems := cp_problems(p, self.device.type)):
            raise ValueError("; ".join(problems))
        capability = torch.cuda.get_device_capability(self.device) if cuda else None
        if problems := fp8_problems(self.spec, p, self.device.type, capability):
            raise ValueError("; ".join(problems))
        if cuda:
            torch.cuda.set_device(self.device)
        dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(seconds=a.timeout_s))
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.mesh = init_device_mesh(self.device.type, (p.pp, p.dp, p.cp, p.tp), mesh_dim_names=MESH_DIMS)
        self.pp_rank, self.dp_rank = self.mesh["pp"].get_local_rank(), self.mesh["dp"].get_local_rank()
        self.dp_mesh = data_parallel_mesh(self.mesh, cp=p.cp)  # gradients average over dp×cp
        self.cp_mesh = self.mesh["cp"]
        if self.cp_active:
            from torch.distributed.tensor.experimental._attention import set_rotate_method

            set_rotate_method(CP_ROTATE_METHOD)
        self.kind = data_parallel_kind(self.zero_stage, dp=p.dp, cp=p.cp)
        self._build()

    def _build(self) -> None:
        p = self.plan
        self.stages: list[Any] = []
        self.schedule: Any = None
        if p.pp == 1:
            self.parts = [self._part(range(self.spec.num_layers), first=True, last=True)]
        else:
            self._build_pipeline()
        self.optims: list[torch.optim.Optimizer] = [
            torch.optim.AdamW(m.parameters(), lr=LR, weight_decay=WEIGHT_DECAY) for m in self.parts
        ]

    def _part(self, layer_ids, *, first: bool, last: bool) -> torch.nn.Module:
        """One stage (or the whole model): built on meta, sharded, then only this rank's shards allocated."""
        p = self.plan
        tied = self.spec.tied_embeddings and p.pp == 1  # as_built untied it at tp > 1
        with torch.device("meta"):
            part = GPT(self.spec, tied=tied).keep_only(tuple(layer_ids), first=first, last=last)

        def materialize(module: torch.nn.Module) -> None:
            module.to_empty(device=self.device)
            if isinstance(module, GPT):
                module.retie()
            init_weights(module, self.args.seed)

        return parallelize(
            part, self.mesh, plan=p, kind=self.kind, schedule=p.schedule, dp_mesh=self.dp_mesh, materialize=materialize
        )

    def _build_pipeline(self) -> None:
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

        p, n = self.plan, self.plan.pp * self.plan.vpp
        group = self.mesh["pp"].get_group()
        self.parts = []
        for chunk in plan_layout(p, self.spec.num_layers).rank_chunks(self.pp_rank):
            part = self._part(chunk.layers, first=chunk.embedding, last=chunk.loss)
            self.parts.append(part)
            self.stages.append(PipelineStage(part, chunk.index, n, self.device, group=group))
        k = p.num_microbatches
        if p.schedule == "interleaved":
            self.schedule = ScheduleInterleaved1F1B(self.stages, n_microbatches=k, loss_fn=cross_entropy)
        else:
            cls = ScheduleGPipe if p.schedule == "gpipe" else Schedule1F1B
            self.schedule = cls(self.stages[0], n_microbatches=k, loss_fn=cross_entropy)

    def _autocast(self):
        dtype = mp_dtype(self.plan.precision)
        if uses_autocast(self.kind, self.plan.precision):
            return torch.autocast(self.device.type, dtype=dtype)
        return nullcontext()

    def train_step(self, step: int, counter: ActivationCounter) -> float:
        p = self.plan
        rows = p.global_batch // p.dp
        x, y = synthetic_batch(
            step, seed=self.args.seed, rows=p.global_batch, seq_len=p.seq_len, vocab=self.spec.vocab_size
        )
        x, y = (t[self.dp_rank * rows : (self.dp_rank + 1) * rows].to(self.device) for t in (x, y))
        for opt in self.optims:
            opt.zero_grad(set_to_none=True)
        holds_last = self.schedule is None or any(s.is_last for s in self.stages)
        loss: torch.Tensor | None = None
        with self._autocast():
            if self.schedule is None:
                loss = self._accumulate(x, y, counter)
            else:
                losses: list[torch.Tensor] = []
                first = any(s.is_first for s in self.stages)
                kw = {"target": y, "losses": losses} if holds_last else {}
                with counter.track():  # the schedule runs every micro-batch's forward inside step()
                    self.schedule.step(*((x,) if first else ()), **kw)
                loss = torch.stack(losses).mean().detach() if holds_last else None
        for opt in self.optims:
            opt.step()
        # Global mean: only last-stage ranks hold a loss; each of them is replicated over tp (and cp).
        total = (loss.float() if loss is not None else torch.zeros((), device=self.device)).reshape(1).clone()
        dist.all_reduce(total)
        return total.item() / (p.dp * p.tp * p.cp)

    def _accumulate(self, x: torch.Tensor, y: torch.Tensor, counter: ActivationCounter) -> torch.Tensor:
        model: Any = self.parts[0]  # plain, DDP or FSDP2 (which adds set_requires_gradient_sync)
        k, mb = self.plan.num_microbatches, self.plan.micro_batch
        total = torch.zeros((), device=self.device)
        for i in range(k):
            # Reduce once per step (sync on the last micro-batch only) or after every micro-batch, as the
            # engine profile's ZeRO stage says (grad_reduce).
            sync = i == k - 1 or self.zero_stage.grad_reduce == "microbatch"
            if hasattr(model, "set_requires_gradient_sync"):
                model.set_requires_gradient_sync(sync)
            ctx = model.no_sync() if (self.kind == "ddp" and not sync) else nullcontext()
            xb, yb = x[i * mb : (i + 1) * mb], y[i * mb : (i + 1) * mb]
            with ctx, counter.track():  # one micro-batch's activations live at a time
                if self.cp_active:
                    loss = self._cp_forward_backward(model, xb, yb, k)
                else:
                    loss = cross_entropy(model(xb), yb) / k
                    loss.backward()
            total += loss.detach().float()
        return total

    def _cp_forward_backward(self, model, xb: torch.Tensor, yb: torch.Tensor, k: int) -> torch.Tensor:
        """One micro-batch under context parallelism: this rank keeps its slice of the sequence.

        Inputs, labels and global position ids are sharded in place on dim 1 (torchtitan's
        ``create_context_parallel_ctx``; none restored, they are per-step copies). Forward and backward
        both run inside the context, where SDPA is ring attention over the cp group. The loss is the mean
        over this rank's tokens; averaging gradients over dp×cp (FSDP on the flattened mesh) and the
        reported loss over the cp ranks gives the full-sequence mean, since every slice has T/cp tokens.
        """
        from torch.distributed.tensor.experimental import context_parallel

        inputs, labels = xb.clone(), yb.clone()  # own storage: the context resizes them in place
        positions = torch.arange(inputs.shape[1], device=inputs.device).expand_as(inputs).clone()
        bufs = [inputs, labels, positions]
        with context_parallel(self.cp_mesh, buffers=bufs, buffer_seq_dims=[1, 1, 1], no_restore_buffers=set(bufs)):
            loss = cross_entropy(model(inputs, positions=positions), labels) / k
            loss.backward()
        return loss
