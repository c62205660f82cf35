"""The common command-line options, one name everywhere (DESIGN.md), as typer Annotated types.

Command modules import these so every command spells --tp, --micro-batch, ... the same way.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="catalog name, model YAML, or HF config.json")]
HardwareOpt = Annotated[
    Optional[str],
    typer.Option("--hardware", help="catalog name or hardware profile YAML (default: h100-sxm, or the --plan file's)"),
]
GpusOpt = Annotated[Optional[int], typer.Option("--gpus", min=1, help="GPUs in all; derives the degree left out (dp)")]
TpOpt = Annotated[Optional[int], typer.Option("--tp", min=1, help="tensor-parallel degree")]
PpOpt = Annotated[Optional[int], typer.Option("--pp", min=1, help="pipeline-parallel degree")]
DpOpt = Annotated[Optional[int], typer.Option("--dp", min=1, help="data-parallel degree")]
CpOpt = Annotated[Optional[int], typer.Option("--cp", min=1, help="context-parallel degree")]
EpOpt = Annotated[Optional[int], typer.Option("--ep", min=1, help="expert-parallel degree (within dp x cp)")]
VppOpt = Annotated[Optional[int], typer.Option("--vpp", min=1, help="virtual pipeline stages per rank")]
SpOpt = Annotated[Optional[bool], typer.Option("--sp/--no-sp", help="Megatron sequence parallelism")]
ZeroOpt = Annotated[Optional[int], typer.Option("--zero", min=0, max=3, help="ZeRO/FSDP stage 0-3")]
RecomputeOpt = Annotated[Optional[str], typer.Option("--recompute", help="none | selective | full")]
MicroBatchOpt = Annotated[Optional[int], typer.Option("--micro-batch", min=1, help="sequences per micro-batch")]
GlobalBatchOpt = Annotated[Optional[int], typer.Option("--global-batch", min=1, help="sequences per step")]
SeqLenOpt = Annotated[Optional[int], typer.Option("--seq-len", min=1, help="tokens per sequence")]
PrecisionOpt = Annotated[Optional[str], typer.Option("--precision", help="fp32 | bf16 | fp16 | fp8")]
ScheduleOpt = Annotated[Optional[str], typer.Option("--schedule", help="gpipe | 1f1b | interleaved")]
PlanFileOpt = Annotated[Optional[str], typer.Option("--plan", help="a saved plan (search --save)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output on stdout")]
EngineOpt = Annotated[
    Optional[str],
    typer.Option(
        "--engine",
        help="the training stack that runs the plan: catalog name or profile YAML (see `planner engines`; "
        "default: megatron, or the --plan file's)",
    ),
]
OptimizerOpt = Annotated[Optional[str], typer.Option("--optimizer", help="adamw | adam | sgd (default: the engine's)")]
SelectivePolicyOpt = Annotated[
    Optional[str],
    typer.Option(
        "--selective-policy",
        help="op (torchtitan per-op SAC) | attention (Korthikanti/Megatron) (default: the engine's)",
    ),
]
NoFlashOpt = Annotated[bool, typer.Option("--no-flash", help="attention without a fused kernel (s x s scores kept)")]
TpOverlapOpt = Annotated[
    Optional[bool],
    typer.Option("--tp-overlap/--no-tp-overlap", help="TP communication overlapped with GEMMs (default: the engine's)"),
]
CompileOpt = Annotated[
    Optional[bool], typer.Option("--compile/--no-compile", help="torch.compile (default: the engine's)")
]
EnginesOpt = Annotated[
    Optional[str],
    typer.Option(
        "--engine",
        help="the training stack(s): a catalog name, a profile YAML, a comma list, or 'all' to rank plans "
        "across every engine (see `planner engines`; default: megatron)",
    ),
]
