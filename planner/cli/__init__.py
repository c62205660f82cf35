"""Typer commands only: parse options, call one library function, render.

The library raises PlannerError; `main` turns it (and click's usage errors) into one line on stderr
and exit code 2. Nothing here imports torch or scipy: `planner memory` must start fast.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from planner.errors import PlannerError

try:  # typer >= 0.20 vendors click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer depends on click
    from click import exceptions as click_exceptions

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Plan, size, estimate and launch parallel LLM training.",
)
models_app = typer.Typer(help="The model catalog (model_specs/).", invoke_without_command=True)
hardware_app = typer.Typer(help="The hardware catalog (hardware_profiles/).", invoke_without_command=True)
app.add_typer(models_app, name="models")
app.add_typer(hardware_app, name="hardware")

# Piped output is not squeezed to 80 columns: tables stay readable in logs and READMEs.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True, highlight=False)

from planner.cli.options import (  # the common option types
    ModelOpt, HardwareOpt, GpusOpt, TpOpt, PpOpt,
    DpOpt, CpOpt, EpOpt, VppOpt, SpOpt,
    ZeroOpt, RecomputeOpt, MicroBatchOpt, GlobalBatchOpt, SeqLenOpt,
    PrecisionOpt, ScheduleOpt, PlanFileOpt, JsonOpt, OptimizerOpt,
    SelectivePolicyOpt, NoFlashOpt,
)
from rich import box


def _choice(name: str, value: str | None, valid: tuple[str, ...]) -> str | None:
    if value is not None and value not in valid:
        raise PlannerError(f"--{name} {value!r} is not valid; choose one of {', '.join(valid)}")
    return value


def _training(optimizer: str, selective_policy: str, no_flash: bool) -> Any:
    from planner.specs import Training

    _choice("optimizer", optimizer, ("adamw", "adam", "sgd"))
    _choice("selective-policy", selective_policy, ("op", "attention"))
    return Training(optimizer=optimizer, selective_policy=selective_policy, flash_attention=not no_flash)


def resolve(
    *, model: str | None, hardware: str | None, gpus: int | None, plan_file: str | None,
    flags: dict[str, Any],
) -> tuple[Any, Any, Any]:
    """Model, hardware and a checked Plan from options and/or a plan file."""
    from planner.io.catalog import load_hardware, load_model
    from planner.io.planfile import build_plan
    from planner.plan import require_valid

    _choice("recompute", flags.get("recompute"), ("none", "selective", "full"))
    _choice("precision", flags.get("precision"), ("fp32", "bf16", "fp16", "fp8"))
    _choice("schedule", flags.get("schedule"), ("gpipe", "1f1b", "interleaved"))
    plan, doc = build_plan(gpus=gpus, plan_file=plan_file, flags=flags)
    model_name = model or doc.get("model")
    if model_name is None:
        raise PlannerError("no model given: pass --model NAME|PATH (see `planner models`) or a --plan file with a model")
    spec = load_model(model_name)
    hw = load_hardware(hardware or doc.get("hardware") or "h100-sxm")
    if "seq_len" not in doc["plan"] and flags.get("seq_len") is None:
        plan = plan.model_copy(update={"seq_len": spec.max_seq_len})
    require_valid(spec, plan, gpus)
    return spec, hw, plan


PLAN_FLAGS = ("tp", "pp", "dp", "cp", "ep", "vpp", "sp", "zero", "recompute", "micro_batch", "global_batch",
              "seq_len", "precision", "schedule")


def _plan_options(opts: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """Model, hardware, checked plan and training settings from a command's common options."""
    training = _training(opts["optimizer"], opts["selective_policy"], opts["no_flash"])
    spec, hw, plan = resolve(model=opts["model"], hardware=opts["hardware"], gpus=opts["gpus"],
                             plan_file=opts["plan"], flags={k: opts[k] for k in PLAN_FLAGS})
    return spec, hw, plan, training


def emit_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


# ---- catalogs ---------------------------------------------------------------------------------------
def _catalog_table(columns: tuple[str, ...], left: tuple[str, ...], *, caption: str | None = None,
                   min_width: bool = False):  # noqa: ANN202 (rich is imported lazily)
    """The borderless listing table of `planner models` and `planner hardware`."""
    from rich import box
    from rich.table import Table

    table = Table(show_edge=False, box=box.SIMPLE_HEAD, pad_edge=False, caption=caption)
    for col in columns:
        table.add_column(col, justify="left" if col in left else "right", min_width=len(col) if min_width else None)
    return table


@models_app.callback()
def models(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List the model catalog."""
    if ctx.invoked_subcommand:
        return
    from planner.io.catalog import list_models, load_model
    from planner.units import fmt_count

    specs = [load_model(n) for n in list_models()]
    if as_json:
        emit_json({"models": [{"name": s.name, "params": s.num_params, "active_params": s.num_active_params,
                               "num_layers": s.num_layers, "hidden_size": s.hidden_size} for s in specs]})
        return
    table = _catalog_table(("name", "params", "layers", "hidden", "heads/kv", "ffn", "mlp", "vocab", "seq", "moe"),
                           left=("name", "mlp", "moe"))
    for s in specs:
        moe = f"{s.moe.num_experts}x top{s.moe.top_k}" if s.moe else ""
        table.add_row(s.name, fmt_count(s.num_params), str(s.num_layers), str(s.hidden_size),
                      f"{s.num_attention_heads}/{s.kv_heads}", str(s.ffn_hidden_size), s.mlp,
                      str(s.vocab_size), str(s.max_seq_len), moe)
    out.print(table)


@models_app.command("show")
def models_show(name: str, as_json: JsonOpt = False) -> None:
    """Print one model spec and its derived parameter counts."""
    from planner.io.catalog import load_model
    from planner.units import fmt_count

    spec = load_model(name)
    doc = spec.model_dump(exclude_none=True)
    doc["derived"] = {"params": spec.num_params, "active_params": spec.num_active_params,
                      "head_dim": spec.head_size, "kv_heads": spec.kv_heads}
    if as_json:
        emit_json(doc)
        return
    import yaml

    out.print(yaml.safe_dump(doc, sort_keys=False).rstrip())
    out.print(f"[dim]derived: {fmt_count(spec.num_params)} parameters, "
              f"{fmt_count(spec.num_active_params)} active per token[/]")


@hardware_app.callback()
def hardware(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List the hardware catalog."""
    if ctx.invoked_subcommand:
        return
    from planner.io.catalog import list_hardware, load_hardware

    profiles = [load_hardware(n) for n in list_hardware()]
    if as_json:
        emit_json({"hardware": [p.model_dump() for p in profiles]})
        return
    table = _catalog_table(("name", "memory", "bf16 TF", "fp8 TF", "HBM TB/s", "per node", "intra GB/s", "inter GB/s"),
                           left=("name",), caption="TFLOP/s dense; link figures per GPU, one direction", min_width=True)
    for p in profiles:
        g = p.gpu
        table.add_row(p.name, f"{g.hbm_bytes / 2**30:.0f} GiB", f"{g.peak_flops['bf16'] / 1e12:.0f}",
                      f"{g.peak_flops['fp8'] / 1e12:.0f}", f"{g.hbm_bandwidth_bytes_per_s / 1e12:.2f}",
                      str(p.gpus_per_node), f"{p.intra_node.bandwidth_bytes_per_s / 1e9:.0f}",
                      f"{p.inter_node.bandwidth_bytes_per_s / 1e9:.1f}")
    out.print(table)


@hardware_app.command("show")
def hardware_show(name: str, as_json: JsonOpt = False) -> None:
    """Print one hardware profile."""
    from planner.io.catalog import load_hardware

    profile = load_hardware(name)
    if as_json:
        emit_json(profile.model_dump())
        return
    import yaml

    out.print(yaml.safe_dump(profile.model_dump(), sort_keys=False).rstrip())


# ---- memory -----------------------------------------------------------------------------------------
@app.command()
def memory(
    model: ModelOpt = None,  # type: ignore[assignment]
    hardware: HardwareOpt = None,  # type: ignore[assignment]
    gpus: GpusOpt = None, tp: TpOpt = None, pp: PpOpt = None, dp: DpOpt = None, cp: CpOpt = None,
    ep: EpOpt = None, vpp: VppOpt = None, sp: SpOpt = None, zero: ZeroOpt = None,
    recompute: RecomputeOpt = None, micro_batch: MicroBatchOpt = None, global_batch: GlobalBatchOpt = None,
    seq_len: SeqLenOpt = None, precision: PrecisionOpt = None, schedule: ScheduleOpt = None,
    plan: PlanFileOpt = None,
    optimizer: OptimizerOpt = "adamw", selective_policy: SelectivePolicyOpt = "op", no_flash: NoFlashOpt = False,
    per_stage: Annotated[bool, typer.Option("--per-stage", help="a row per pipeline stage")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Per-GPU memory of one plan: weights, gradients, optimizer, activations, buffers, reserved."""
    from planner.cost.memory import memory_report
    from planner.render.tables import memory_json, print_memory

    spec, hw, the_plan, training = _plan_options(locals())
    report = memory_report(spec, hw, the_plan, training)
    if as_json:
        emit_json(memory_json(spec, hw, the_plan, report))
    else:
        print_memory(out, spec, hw, the_plan, report, per_stage=per_stage)


# ---- estimate ---------------------------------------------------------------------------------------
@app.command()
def estimate(
    model: ModelOpt = None,  # type: ignore[assignment]
    hardware: HardwareOpt = None,  # type: ignore[assignment]
    gpus: GpusOpt = None, tp: TpOpt = None, pp: PpOpt = None, dp: DpOpt = None, cp: CpOpt = None,
    ep: EpOpt = None, vpp: VppOpt = None, sp: SpOpt = None, zero: ZeroOpt = None,
    recompute: RecomputeOpt = None, micro_batch: MicroBatchOpt = None, global_batch: GlobalBatchOpt = None,
    seq_len: SeqLenOpt = None, precision: PrecisionOpt = None, schedule: ScheduleOpt = None,
    plan: PlanFileOpt = None,
    optimizer: OptimizerOpt = "adamw", selective_policy: SelectivePolicyOpt = "op", no_flash: NoFlashOpt = False,
    tokens: Annotated[Optional[float], typer.Option("--tokens", min=1, help="tokens to train: time and GPU-hours")] = None,
    mtbf_hours: Annotated[Optional[float], typer.Option("--mtbf-hours", min=0.001, help="mean time between failures, hours")] = None,
    mtbf_per: Annotated[str, typer.Option("--mtbf-per", help="the MTBF is per gpu or per node")] = "gpu",
    checkpoint_bandwidth: Annotated[Optional[float], typer.Option(
        "--checkpoint-bandwidth", min=1, help="aggregate checkpoint write bandwidth, bytes/s")] = None,
    timeline: Annotated[Optional[str], typer.Option("--timeline", help="draw one step's pipeline schedule (.svg/.png)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Step time breakdown, throughput, MFU/HFU and the memory summary of one plan."""
    from planner.cost.estimate import estimate as run_estimate
    from planner.render.tables import estimate_json, print_estimate

    _choice("mtbf-per", mtbf_per, ("gpu", "node"))
    spec, hw, the_plan, training = _plan_options(locals())
    est = run_estimate(spec, hw, the_plan, training, tokens=tokens, mtbf_hours=mtbf_hours, mtbf_per=mtbf_per,
                       checkpoint_bandwidth_bytes_per_s=checkpoint_bandwidth)
    if timeline:
        from planner.render.timeline import draw_timeline

        draw_timeline(est, timeline)
    if as_json:
        emit_json(estimate_json(est))
    else:
        print_estimate(out, est)
        if timeline:
            out.print(f"timeline written to {timeline}")


# ---- validate ---------------------------------------------------------------------------------------
@app.command()
def validate(
    runs: Annotated[str, typer.Argument(help="runs file (the calibration_runs.yaml schema)")],
    hardware: Annotated[Optional[str], typer.Option("--hardware", help="use this profile for every run")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Predicted vs measured throughput and peak memory for a file of real runs."""
    from rich.table import Table

    from planner.io.catalog import load_hardware
    from planner.fit.validate import load_runs, validate_runs, validation_json

    override = load_hardware(hardware) if hardware else None
    result = validate_runs(load_runs(runs), hardware=override)
    if as_json:
        emit_json(validation_json(result))
        return
    table = Table(show_edge=False, box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("run", "tokens/s/GPU pred", "meas", "err", "peak GiB pred", "meas", "err"):
        table.add_column(col, justify="left" if col == "run" else "right")

    def pct(r, k):  # noqa: ANN001, ANN202
        e = r.error_pct.get(k)
        return "" if e is None else f"{e:+.1f}%"

    for r in result.runs:
        if r.skipped:
            continue
        pm, mm = r.predicted.get("peak_memory_bytes"), r.measured.get("peak_memory_bytes")
        table.add_row(r.id, f"{r.predicted['tokens_per_s_per_gpu']:,.1f}",
                      f"{r.measured.get('tokens_per_s_per_gpu', float('nan')):,.1f}", pct(r, "tokens_per_s_per_gpu"),
                      f"{pm / 2**30:.1f}" + ("" if r.fits else " !"), f"{mm / 2**30:.1f}" if mm else "",
                      pct(r, "peak_memory_bytes"))
    out.print(table)
    for r in result.runs:
        if r.skipped:
            out.print(f"[yellow]not evaluated[/] {r.id}: {r.skipped}")
    names = {"tokens_per_s_per_gpu": "tokens/s per GPU", "peak_memory_bytes": "peak memory", "step_s": "step time"}
    for metric, s in result.summary().items():
        if metric in names:
            out.print(f"{names[metric]}: median |error| {s['median_abs_pct']:.1f}%, max {s['max_abs_pct']:.1f}% "
                      f"over {s['n']} runs")
    if any(r.fits is False for r in result.runs):
        out.print("[dim]! = predicted not to fit the profile's memory (the run used a larger-memory variant)[/]")


# ---- calibrate --------------------------------------------------------------------------------------
@app.command()
def calibrate(
    inputs: Annotated[list[str], typer.Argument(help="launch profile .json files and/or runs .yaml files")],
    hardware: HardwareOpt = "h100-sxm",
    output: Annotated[str, typer.Option("-o", "--output", help="write the calibrated profile here (.yaml)")] = "",
    params: Annotated[Optional[str], typer.Option("--params", help="comma list of parameters to fit")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Fit a hardware profile's efficiency parameters to measured runs and write a new profile."""
    from pathlib import Path

    from rich.table import Table

    from planner.fit.calibrate import PARAMS, fit, load_observations, write_profile
    from planner.io.catalog import catalog_root, load_hardware

    if not output:
        raise PlannerError("give -o NEW.yaml: the calibrated profile is written there")
    base = load_hardware(hardware)
    names = tuple(p.strip() for p in params.split(",")) if params else tuple(PARAMS)
    obs = load_observations(inputs, base)
    result = fit(obs, base, names=names)
    source = Path(hardware) if Path(hardware).is_file() else catalog_root() / "hardware_profiles" / f"{base.name}.yaml"
    write_profile(result, source.read_text() if source.is_file() else None, output)
    if as_json:
        emit_json({"hardware": base.name, "output": output, "params": result.values, "stderr": result.stderr,
                   "before_pct": result.before_pct, "after_pct": result.after_pct,
                   "median_abs_pct": {"before": result.median_before_pct, "after": result.median_after_pct}})
        return
    table = Table(title="fitted parameters", title_justify="left", show_edge=False)
    for col in ("parameter", "value", "± 1 s.e."):
        table.add_column(col, justify="left" if col == "parameter" else "right")
    for n in result.names:
        table.add_row(n, f"{result.values[n]:.4g}", f"{result.stderr[n]:.2g}")
    out.print(table)
    runs_table = Table(title="step time error per run", title_justify="left", show_edge=False)
    for col in ("run", "before", "after"):
        runs_table.add_column(col, justify="left" if col == "run" else "right")
    for o in result.observations:
        runs_table.add_row(o.id, f"{result.before_pct[o.id]:+.1f}%", f"{result.after_pct[o.id]:+.1f}%")
    out.print(runs_table)
    out.print(f"median |error| {result.median_before_pct:.1f}% -> {result.median_after_pct:.1f}% over "
              f"{len(result.observations)} runs; wrote {output} (use it with --hardware {output})")


# ---- entry point ------------------------------------------------------------------------------------
def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    err.print(f"[yellow]warning:[/] {message}")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; every user error is one line on stderr and exit code 2."""
    warnings.showwarning = _warning_line
    try:
        app(args=argv, standalone_mode=False)
    except PlannerError as e:
        err.print(f"[red]error:[/] {e}", soft_wrap=True)
        sys.exit(2)
    except click_exceptions.NoArgsIsHelpError as e:
        err.print(e.format_message(), markup=False)
        sys.exit(2)
    except click_exceptions.UsageError as e:
        where = f" ({e.ctx.command_path})" if e.ctx else ""
        err.print(f"[red]error:[/] {e.format_message()}{where}", soft_wrap=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted")
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(0)

# `planner launch` lives in planner/launch (torch is imported only inside the worker processes).
from planner.cli.launch import launch as _launch; app.command("launch")(_launch)  # noqa: E402,E702
from planner.cli.search import search as _search  # noqa: E402
app.command("search")(_search)
from planner.cli.bench import bench_hardware as _bench_hardware  # noqa: E402
app.command("bench-hardware")(_bench_hardware)
