"""`planner launch`: run a plan for real with torch.distributed, or emit it for a cluster or another engine.

Pure modules (no torch import, so `planner memory` starts fast): ``layout`` (rank coordinates and layers),
``spec`` (model loading and rehearsal shrinking), ``command`` (worker/torchrun argv and the pre-flight check),
``machine`` (this host's cores and memory, the launch limits), ``rehearse`` (a plan shrunk to fit this host),
``processes`` (no orphaned workers), ``emit`` (torchrun / Slurm / Kubernetes, Megatron-LM / torchtitan /
DeepSpeed). Torch modules, imported only by the worker process: ``model``, ``parallelize``, ``tensor_parallel``,
``checkpoint``, ``profile``, ``trainer``, ``worker``.
"""

import os

# The parent of this process when the package was first imported. In a worker (`python -m
# planner.launch.worker`) that is before torch's import, which takes seconds: the worker compares it with its
# parent once it has armed its parent-death signal, so a torchrun that died meanwhile is noticed
# (processes.arm_worker).
PARENT_PID_AT_START = os.getppid()
