"""`planner models`, `planner hardware`, `planner engines`: the catalog listings and `show NAME` documents."""

from __future__ import annotations

from typing import Any

import yaml
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from planner.engine import Engine
from planner.hardware import HardwareProfile
from planner.render.console import print_unlimited
from planner.specs import ModelSpec
from planner.units import fmt_count


def _catalog_table(
    columns: tuple[str, ...],
    left: tuple[str, ...],
    *,
    caption: str | None = None,
    wrap: tuple[str, ...] = (),
) -> Table:
    """The borderless listing table of `planner models`, `planner hardware` and `planner engines`: numbers are never
    cut; the `wrap` columns (names, descriptions) wrap when the table would not fit the console."""
    table = Table(show_edge=False, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, caption=caption)
    for col in columns:
        table.add_column(
            col,
            justify="left" if col in left else "right",
            no_wrap=col not in wrap,
            overflow="fold",
        )
    return table


def models_json(specs: list[ModelSpec]) -> dict[str, Any]:
    return {
        "models": [
            {
                "name": s.name,
                "params": s.num_params,
                "active_params": s.num_active_params,
                "num_layers": s.num_layers,
                "hidden_size": s.hidden_size,
            }
            for s in specs
        ]
    }


def print_models(console: Console, specs: list[ModelSpec]) -> None:
    table = _catalog_table(
        ("name", "params", "layers", "hidden", "heads/kv", "ffn", "mlp", "vocab", "seq", "moe"),
        left=("name", "mlp", "moe"),
        wrap=("moe",),
    )
    for s in specs:
        moe = f"{s.moe.num_experts}x top{s.moe.top_k}" if s.moe else ""
        table.add_row(
            escape(s.name),
            fmt_count(s.num_params),
            str(s.num_layers),
            str(s.hidden_size),
            f"{s.num_attention_heads}/{s.kv_heads}",
            str(s.ffn_hidden_size),
            s.mlp,
            str(s.vocab_size),
            str(s.max_seq_len),
            moe,
        )
    console.print(table)


def model_doc(spec: ModelSpec) -> dict[str, Any]:
    doc = spec.model_dump(exclude_none=True)
    doc["derived"] = {
        "params": spec.num_params,
        "active_params": spec.num_active_params,
        "head_dim": spec.head_size,
        "kv_heads": spec.kv_heads,
    }
    return doc


def print_model(console: Console, spec: ModelSpec) -> None:
    """The spec as a model file (saved, it loads as `--model FILE`: a copy to edit), and what it derives as a
    comment."""
    text = yaml.safe_dump(spec.model_dump(exclude_none=True), sort_keys=False, width=10**6).rstrip()
    console.print(text, markup=False, soft_wrap=True)  # never folded at the terminal's width: it must stay YAML
    console.print(
        f"# derived: {fmt_count(spec.num_params)} parameters, {fmt_count(spec.num_active_params)} active per "
        f"token (the embedding table counted whole, as model cards mostly do not), head_dim {spec.head_size}, "
        f"{spec.kv_heads} kv heads",
        markup=False,
        soft_wrap=True,
        style="dim",
    )


def print_hardware(console: Console, profiles: list[HardwareProfile]) -> None:
    table = _catalog_table(
        ("name", "memory", "bf16\nTF", "fp8\nTF", "HBM\nTB/s", "per\nnode", "NVLink", "intra\nGB/s", "inter\nGB/s"),
        left=("name",),
        caption="TFLOP/s dense; NVLink: GPUs per NVLink domain (the intra tier); link figures per GPU, one direction",
    )
    for p in profiles:
        g = p.gpu
        table.add_row(
            escape(p.name),
            f"{g.hbm_bytes / 2**30:.0f} GiB",
            f"{g.peak_flops['bf16'] / 1e12:.0f}" if p.supports("bf16") else "-",
            f"{g.peak_flops['fp8'] / 1e12:.0f}" if p.supports("fp8") else "-",
            f"{g.hbm_bandwidth_bytes_per_s / 1e12:.2f}",
            str(p.gpus_per_node),
            str(p.nvlink_domain),
            f"{p.intra_node.bandwidth_bytes_per_s / 1e9:.0f}",
            f"{p.inter_node.bandwidth_bytes_per_s / 1e9:.1f}",
        )
    console.print(table)


def print_document(console: Console, doc: dict[str, Any]) -> None:
    """A profile as YAML, never folded at the terminal's width: saved, it loads as the profile (a copy to edit)."""
    console.print(yaml.safe_dump(doc, sort_keys=False, width=10**6).rstrip(), markup=False, soft_wrap=True)


def engines_json(engines: list[Engine]) -> dict[str, Any]:
    return {"engines": [e.model_dump() for e in engines]}


def print_engines(console: Console, engines: list[Engine], *, wide: bool = False) -> None:
    """One row per engine: the ZeRO stages it runs (with pipelining), its schedules and what it is; --wide adds the
    attention kernel and the gradient dtype (`planner engines show NAME` has everything)."""
    extra = ("attention", "grads") if wide else ()
    cols = ("name", "zero (with pp)", "schedules", *extra, "description")
    table = _catalog_table(cols, left=cols, wrap=("description",))
    for e in engines:
        r = e.rules
        with_pp = ",".join(map(str, sorted(r.stages(2)))) or "-"
        table.add_row(
            escape(e.name),
            f"{','.join(map(str, sorted(r.zero)))} ({with_pp})",
            ",".join(r.schedules),
            *((e.kernels.attention, e.memory.grad_dtype) if wide else ()),
            escape(e.description),
        )
    if wide:
        print_unlimited(console, table)
    else:
        console.print(table)
