"""How every torchrun probe of this folder ends: all ranks meet before gloo is torn down (none while another still
has collectives in flight), then the process leaves as the worker does (planner/launch/worker.py), skipping C++ static
destructors, where gloo's threads intermittently abort a finished process ("terminate called without an active
exception", SIGABRT, about once in 20 two-rank runs on torch 2.13 CPU). Imported by the probes only when run as
scripts (torchrun puts this folder first on sys.path)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn


def run_probe_main(main: Callable[[], None]) -> NoReturn:
    """Run a probe's `main` with one OpenMP thread, then end the process group and leave at once."""
    import torch.distributed as dist

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
