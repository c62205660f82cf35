"""The process torchrun starts: build the model and apply the plan (trainer.py), train, checkpoint, write the
profile (torch).

    torchrun --standalone --nproc-per-node 4 -m planner.launch.worker --model tiny --dp 2 --tp 2 ...

Backend from the environment: NCCL on CUDA, gloo on CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import warnings
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import ErrorHandler, record

from planner.io.files import finite_json, write_text_atomic
from planner.launch import PARENT_PID_AT_START
from planner.launch.measured import ActivationCounter, model_state_bytes, ranks_per_core, summarize
from planner.launch.processes import arm_worker
from planner.launch.trainer import CP_ROTATE_METHOD, Trainer
from planner.plan import Plan

ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"  # where torchrun tells a worker to write its error (ErrorHandler)


class WholeErrorFile(ErrorHandler):
    """torch elastic's error file, written whole or not at all. When a rank fails, torchrun terminates the others
    and then reads every failed rank's error file (torch/distributed/elastic/multiprocessing/api.py
    SubprocessContext._poll: close(), then _capture_process_failures); a surviving rank killed while its @record
    handler writes leaves a truncated file, and torchrun itself dies on it (json.JSONDecodeError in
    ProcessFailure.__post_init__) instead of restarting the workers. Written under a temporary name and renamed
    (atomic on POSIX), the file torchrun reads is complete or absent."""

    def record_exception(self, e: BaseException) -> None:
        file = os.environ.get(ERROR_FILE_ENV)
        if not file:
            super().record_exception(e)
            return
        os.environ[ERROR_FILE_ENV] = tmp = f"{file}.{os.getpid()}.tmp"  # torch's own JSON, to a temporary name
        try:
            super().record_exception(e)
            os.replace(tmp, file)
        except OSError as err:
            warnings.warn(f"Unable to write error to file. {type(err).__name__}: {err}", stacklevel=2)
        finally:
            os.environ[ERROR_FILE_ENV] = file


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
        ("--keep-checkpoints", int, 2),
    ):
        ap.add_argument(flag, type=typ, default=default)
    ap.add_argument("--resume", action="store_true")
    return ap.parse_args(argv)


def _injected(var: str, rank: int, step: int) -> bool:
    """Test hooks: PLANNER_LAUNCH_FAIL / _HANG = "rank:step", acting on the first attempt only."""
    spec = os.environ.get(var)
    if not spec or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return False
    r, s = (int(x) for x in spec.split(":"))
    return r == rank and s == step


def _log_step(path: Path, record_: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record_) + "\n")


@partial(record, error_handler=WholeErrorFile())
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    t = Trainer(args)
    start = 0
    if args.checkpoint_dir and (args.resume or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0"):
        from planner.launch import checkpoint  # torch.distributed.checkpoint: 0.9-1.4 s of a worker's start

        start = checkpoint.load_latest(args.checkpoint_dir, t.parts, t.optims) or 0
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    out = Path(args.profile_out)
    steps_log = out.with_name(out.name + ".steps.jsonl")
    if t.rank == 0:
        out.parent.mkdir(parents=True, exist_ok=True)
        if start == 0 and attempt == 0:  # a fresh run: not the steps of an earlier one at the same path (audit)
            steps_log.unlink(missing_ok=True)
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
            from planner.launch import checkpoint

            checkpoint.save(args.checkpoint_dir, step, t.parts, t.optims, keep=args.keep_checkpoints)
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
    # the process's peak resident memory (getrusage(2) ru_maxrss, KiB on Linux): what the host memory check bounds
    mem["host_peak_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
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
        "ranks_per_core": ranks_per_core(t.device.type),
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
    # whole or absent, and JSON: a diverged loss (NaN, inf) is written as null
    write_text_atomic(out, json.dumps(finite_json(prof), indent=2, allow_nan=False) + "\n", what="profile", kept=True)


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
