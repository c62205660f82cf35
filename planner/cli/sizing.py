"""`planner memory` and `planner estimate`: one plan's per-GPU memory and step time, broken into terms."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from planner.api.resolve import resolve_options
from planner.cli.options import (
    CheckpointBwOpt,
    CompileOpt,
    CpOpt,
    DpOpt,
    EngineOpt,
    EpOpt,
    GlobalBatchOpt,
    GpusOpt,
    GradDtypeOpt,
    HardwareOpt,
    JsonOpt,
    MicroBatchOpt,
    ModelOpt,
    MtbfOpt,
    MtbfPerOpt,
    NoFlashOpt,
    OptimizerOpt,
    PlanFileOpt,
    PpOpt,
    PrecisionOpt,
    RecomputeOpt,
    ScheduleOpt,
    SelectivePolicyOpt,
    SeqLenOpt,
    SpOpt,
    TokensOpt,
    TpOpt,
    TpOverlapOpt,
    VppOpt,
    ZeroOpt,
)
from planner.errors import PlannerError
from planner.render.console import emit_json, out


def memory(
    model: ModelOpt = None,  # type: ignore[assignment]
    hardware: HardwareOpt = None,
    engine: EngineOpt = None,
    gpus: GpusOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    dp: DpOpt = None,
    cp: CpOpt = None,
    ep: EpOpt = None,
    vpp: VppOpt = None,
    sp: SpOpt = None,
    zero: ZeroOpt = None,
    recompute: RecomputeOpt = None,
    micro_batch: MicroBatchOpt = None,
    global_batch: GlobalBatchOpt = None,
    seq_len: SeqLenOpt = None,
    precision: PrecisionOpt = None,
    schedule: ScheduleOpt = None,
    plan: PlanFileOpt = None,
    optimizer: OptimizerOpt = None,
    selective_policy: SelectivePolicyOpt = None,
    no_flash: NoFlashOpt = False,
    tp_overlap: TpOverlapOpt = None,
    compile: CompileOpt = None,
    grad_dtype: GradDtypeOpt = None,
    per_stage: Annotated[bool, typer.Option("--per-stage", help="a row per pipeline stage")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Per-GPU memory of one plan: weights, gradients, optimizer, activations, buffers, reserved."""
    from planner.cost.memory import memory_report
    from planner.render.breakdown import print_memory
    from planner.render.documents import memory_doc

    r = resolve_options(locals())
    report = memory_report(r.model, r.hardware, r.plan, r.engine)
    if as_json:
        emit_json(memory_doc(r.model, r.hardware, r.plan, report, r.engine).as_json())
    else:
        print_memory(out, r.model, r.hardware, r.plan, report, per_stage=per_stage, engine=r.engine)


def estimate(
    model: ModelOpt = None,  # type: ignore[assignment]
    hardware: HardwareOpt = None,
    engine: EngineOpt = None,
    gpus: GpusOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    dp: DpOpt = None,
    cp: CpOpt = None,
    ep: EpOpt = None,
    vpp: VppOpt = None,
    sp: SpOpt = None,
    zero: ZeroOpt = None,
    recompute: RecomputeOpt = None,
    micro_batch: MicroBatchOpt = None,
    global_batch: GlobalBatchOpt = None,
    seq_len: SeqLenOpt = None,
    precision: PrecisionOpt = None,
    schedule: ScheduleOpt = None,
    plan: PlanFileOpt = None,
    optimizer: OptimizerOpt = None,
    selective_policy: SelectivePolicyOpt = None,
    no_flash: NoFlashOpt = False,
    tp_overlap: TpOverlapOpt = None,
    compile: CompileOpt = None,
    grad_dtype: GradDtypeOpt = None,
    tokens: TokensOpt = None,
    mtbf_hours: MtbfOpt = None,
    mtbf_per: MtbfPerOpt = "gpu",
    checkpoint_bandwidth: CheckpointBwOpt = None,
    timeline: Annotated[
        Optional[str], typer.Option("--timeline", help="draw one step's pipeline schedule (.svg/.png)")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Step time breakdown, throughput, MFU/HFU and the memory summary of one plan."""
    from planner.api import run_estimate
    from planner.render.breakdown import print_estimate
    from planner.render.documents import estimate_doc

    if mtbf_per not in ("gpu", "node"):
        raise PlannerError(f"--mtbf-per {mtbf_per!r} is not valid; choose one of gpu, node")
    r = resolve_options(locals())
    est = run_estimate(
        r, tokens=tokens, mtbf_hours=mtbf_hours, mtbf_per=mtbf_per, checkpoint_bandwidth=checkpoint_bandwidth
    )
    if timeline:
        from planner.render.timeline import draw_timeline

        draw_timeline(est, timeline)
    if as_json:
        emit_json(estimate_doc(est).as_json())
    else:
        print_estimate(out, est)
        if timeline:
            out.print(f"timeline written to {timeline}")
