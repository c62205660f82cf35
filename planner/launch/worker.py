"""The process torchrun starts: build the model, apply the plan, train, checkpoint, write the profile (torch).

    torchrun --standalone --nproc-per-node 4 -m planner.launch.worker --model tiny --dp 2 --tp 2 ...

Backend from the environment: NCCL on CUDA, gloo on CPU. Data is synthetic and a pure function of
(seed, step): every layout sees the same global batch, and dp rank r takes rows [r·B/dp, (r+1)·B/dp).

Context parallelism (cp > 1) runs only on CUDA: the cp ranks of one dp rank take the same rows, and
``torch.distributed.tensor.experimental.context_parallel`` shards their sequence dimension (load-balanced
head-tail chunks when 2·cp divides seq_len) and swaps F.scaled_dot_product_attention for ring attention.
On CPU the worker refuses cp > 1 (torch has no CP rule for the CPU SDPA kernel, torch_cpu_notes.md row 11).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.elastic.multiprocessing.errors import record

from planner.io.catalog import load_engine, load_model
from planner.launch import PARENT_PID_AT_START, checkpoint
from planner.launch.layout import MESH_DIMS, plan_layout
from planner.launch.measured import ActivationCounter, model_state_bytes, summarize
from planner.launch.model import GPT, cross_entropy, init_weights
from planner.launch.parallelize import data_parallel_kind, data_parallel_mesh, mp_dtype, parallelize, uses_autocast
from planner.launch.preflight import cp_problems, uses_context_parallel
from planner.launch.processes import arm_worker
from planner.launch.spec import shrink
from planner.plan import Plan

LR, WEIGHT_DECAY = 3e-3, 0.1
CP_ROTATE_METHOD = "allgather"  # torch's default; torchtitan's default too


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="planner.launch.worker")
    ap.add_argument("--model", required=True)
    for name, f in Plan.model_fields.items():  # the inverse of command.plan_argv
        flag = "--" + name.replace("_", "-")
        if f.annotation is bool:
            ap.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=f.default)
        else:
            integer = f.annotation in (int, int | None)
            ap.add_argument(flag, dest=name, type=int if integer else str, default=f.default)
    for flag, typ, default in (
        ("--steps", int, 8),
        ("--warmup", int, 2),
        ("--seed", int, 0),
        ("--layers", int, None),
        ("--hidden", int, None),
        ("--hardware", str, "cpu"),
        ("--engine", str, "planner"),
        ("--timeout-s", float, 120.0),
        ("--profile-out", str, "planner-launch-profile.json"),
        ("--checkpoint-dir", str, None),
        ("--checkpoint-every", int, 0),
    ):
        ap.add_argument(flag, type=typ, default=default)
    ap.add_argument("--resume", action="store_true")
    return ap.parse_args(argv)


def synthetic_batch(step: int, *, seed: int, rows: int, seq_len: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Arithmetic token sequences (random start and stride per row): learnable, seeded, layout-independent."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    start = torch.randint(0, vocab, (rows, 1), generator=g)
    stride = torch.randint(1, 8, (rows, 1), generator=g)
    tokens = (start + stride * torch.arange(seq_len + 1)) % vocab
    return tokens[:, :-1], tokens[:, 1:]


def _injected(var: str, rank: int, step: int) -> bool:
    """Test hooks: PLANNER_LAUNCH_FAIL / _HANG = "rank:step", acting on the first attempt only."""
    spec = os.environ.get(var)
    if not spec or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return False
    r, s = (int(x) for x in spec.split(":"))
    return r == rank and s == step


class Trainer:
    def __init__(self, args: argparse.Namespace):
        self.args = a = args
        self.plan = Plan(**{k: getattr(a, k) for k in Plan.model_fields})
        p = self.plan
        self.spec = shrink(load_model(a.model), layers=a.layers, hidden=a.hidden, tp=p.tp)
        # The engine profile decides how the ZeRO stage runs and when gradients are reduced; the cost model
        # prices the run with the same profile.
        self.zero_stage = load_engine(a.engine).zero_stage(p)
        cuda = torch.cuda.is_available()  # from the environment; --hardware is only a label
        self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
        # Refuse before any process group exists: cp > 1 on CPU raises here with the reason.
        self.cp_active = uses_context_parallel(p.cp, self.device.type)
        if self.cp_active and (problems := cp_problems(p, self.device.type)):
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
        tied = self.spec.tied_embeddings and p.tp == 1 and p.pp == 1
        with torch.device("meta"):
            part = GPT(self.spec, tied=tied).keep_only(tuple(layer_ids), first=first, last=last)

        def materialize(module: torch.nn.Module) -> None:
            module.to_empty(device=self.device)
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


def _log_step(path: Path, record_: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record_) + "\n")


@record
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    t = Trainer(args)
    start = 0
    if args.checkpoint_dir and (args.resume or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0"):
        start = checkpoint.load_latest(args.checkpoint_dir, t.parts, t.optims) or 0
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    out = Path(args.profile_out)
    steps_log = out.with_name(out.name + ".steps.jsonl")
    if t.rank == 0:
        out.parent.mkdir(parents=True, exist_ok=True)
        print(
            f"[launch] {t.plan.summary()} world={t.world} kind={t.kind} model={t.spec.name} "
            f"layers={t.spec.num_layers} hidden={t.spec.hidden_size} start_step={start + 1} attempt={attempt}"
            + (f" context_parallel=ring-{CP_ROTATE_METHOD} cp={t.plan.cp}" if t.cp_active else ""),
            flush=True,
        )
    counter, times, losses = ActivationCounter(t.parts), [], []
    for step in range(start + 1, args.steps + 1):
        if _injected("PLANNER_LAUNCH_FAIL", t.rank, step):
            os._exit(13)
        if _injected("PLANNER_LAUNCH_HANG", t.rank, step):
            time.sleep(10**6)
        t0 = time.perf_counter()
        try:
            loss = t.train_step(step, counter)
        except RuntimeError as exc:
            if "timed out" in str(exc).lower() or "timeout" in str(exc).lower():
                raise RuntimeError(
                    f"rank {t.rank}: a collective timed out after {args.timeout_s:g} s at step {step} "
                    f"(a peer rank is hung or dead; --timeout-s sets the limit): {exc}"
                ) from exc
            raise
        times.append(time.perf_counter() - t0)
        losses.append(loss)
        if t.rank == 0:
            print(f"[launch] step {step}/{args.steps} loss {loss:.6f} time {times[-1]:.3f} s", flush=True)
            _log_step(steps_log, {"step": step, "loss": loss, "time_s": times[-1], "attempt": attempt})
        if args.checkpoint_dir and args.checkpoint_every and step % args.checkpoint_every == 0:
            checkpoint.save(args.checkpoint_dir, step, t.parts, t.optims)
    _write_profile(t, args, out, start=start, times=times, losses=losses, counter=counter, attempt=attempt)
    dist.barrier()  # no rank tears gloo down while a peer is still in a collective
    dist.destroy_process_group()


def _write_profile(t: Trainer, args, out: Path, *, start, times, losses, counter, attempt) -> None:
    mem = model_state_bytes(t.parts, t.optims)
    mem["activation_bytes"] = counter.peak
    if t.device.type == "cuda":
        mem["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated(t.device)
    mem["peak_bytes"] = mem.get("max_memory_allocated_bytes") or sum(
        mem[k] for k in ("params_bytes", "grads_bytes", "optimizer_bytes", "activation_bytes")
    )
    per_rank: list = [None] * t.world
    dist.all_gather_object(per_rank, {"rank": t.rank, **mem})
    if t.rank != 0:
        return
    prof = {
        "plan": t.plan.model_dump(),
        "model": t.spec.model_dump(),
        "model_ref": args.model,
        "hardware": args.hardware,
        "device": torch.cuda.get_device_name(t.device) if t.device.type == "cuda" else "cpu",
        "backend": dist.get_backend(),
        "torch_version": torch.__version__,
        "world_size": t.world,
        "data_parallel": t.kind,
        "start_step": start + 1,
        "attempt": attempt,
        "context_parallel": f"ring-{CP_ROTATE_METHOD}" if t.cp_active else "off",
        "losses": [{"step": start + 1 + i, "loss": v} for i, v in enumerate(losses)],
        **summarize(times, min(args.warmup, len(times)), t.plan.tokens_per_step),
        "memory_per_rank": per_rank,
        "memory_method": "torch.cuda.max_memory_allocated"
        if t.device.type == "cuda"
        else "tensor storages: params + grads + optimizer state + saved activations",
    }
    for row, s in zip(prof["step_times_s"], range(start + 1, start + 1 + len(times))):
        row["step"] = s
    out.write_text(json.dumps(prof, indent=2) + "\n")


if __name__ == "__main__":
    arm_worker(PARENT_PID_AT_START)  # die with torchrun, whatever kills it (processes.py)
    main(sys.argv[1:])
    # Success: the profile is written and the process group destroyed. Leave without running C++ static
    # destructors: gloo's worker threads intermittently abort the process there ("terminate called
    # without an active exception", SIGABRT, seen about once in 20 two-process runs on torch 2.13 CPU),
    # which torchrun reports as a failed run. Failures still raise above and exit through torchrun's
    # error path.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
