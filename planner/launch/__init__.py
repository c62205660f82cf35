"""`planner launch`: run a plan for real with torch.distributed, or emit it for a cluster or another engine.

Pure modules (no torch import, so `planner memory` starts fast): ``layout`` (rank coordinates and layers),
``spec`` (model loading and rehearsal shrinking), ``command`` (worker/torchrun argv and the pre-flight check),
``emit_cluster`` (torchrun / Slurm / Kubernetes) and ``emit_engines`` (Megatron-LM / torchtitan / DeepSpeed).
Torch modules, imported only by the worker process: ``model``, ``parallelize``, ``checkpoint``, ``profile``,
``worker``.
"""
