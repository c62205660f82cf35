"""The checks of a parallel plan against a model: which rules its degrees and batch break.

A plan that cannot run is data, not an exception: ``check_plan`` returns a list of ``Rejected`` (plan.py) with a
stable ``reason`` (what the search counts by) and a ``detail`` that names the values and what would be
valid. ``engine.require_runs`` turns them, with the engine's own rules, into one ``PlannerError`` for commands
that take a single plan.
"""

from __future__ import annotations

from planner.plan import Plan, Rejected, divisors
from planner.specs import ModelSpec

BATCH_INDIVISIBLE = "global batch not divisible by dp x micro-batch"  # the rule a batch hint answers


def _near(n: int, limit: int = 8) -> str:
    """The divisors of n as a list to read: all of them, or the first `limit`, '...' and n itself (a printed Python
    list ended in '...' and hid n: "try [1, 2, 4, 8, 16, 32, 64, 128, '...']" for 256)."""
    ds = [str(d) for d in divisors(n)]
    return ", ".join(ds if len(ds) <= limit + 1 else [*ds[:limit], "...", ds[-1]])


def check_plan(model: ModelSpec, plan: Plan, gpus: int | None = None) -> list[Rejected]:
    """Every rule the plan breaks for this model (empty list: the plan can run): its degrees, then its batch."""
    return check_structure(model, plan, gpus) + check_batch(plan)


def check_batch(plan: Plan) -> list[Rejected]:
    """The rule on the micro-batch: the global batch splits into whole micro-batches on every dp rank."""
    p = plan
    if p.global_batch % (p.dp * p.micro_batch) == 0:
        m = p.num_microbatches
        if p.schedule == "dualpipev" and m < 2 * p.pp:
            return [
                Rejected(
                    "dualpipev needs 2 pp micro-batches",
                    f"schedule=dualpipev needs at least 2 x pp = {2 * p.pp} micro-batches per step, got {m} "
                    "(deepseek-ai/DualPipe dualpipev.py)",
                )
            ]
        return []
    return [
        Rejected(
            BATCH_INDIVISIBLE,
            f"global_batch={p.global_batch} is not divisible by dp={p.dp} x micro_batch={p.micro_batch}"
            f" = {p.dp * p.micro_batch}",
        )
    ]


def check_structure(model: ModelSpec, plan: Plan, gpus: int | None = None) -> list[Rejected]:
    """The rules on the degrees, schedule, sequence and precision, whatever the micro-batch (the search checks
    them once per structure), in a fixed order: a plan is counted under its first."""
    p = plan
    out: list[Rejected] = []
    if gpus is not None and p.gpus != gpus:
        out.append(
            Rejected(
                "degrees do not multiply to gpus",
                f"tp={p.tp} x pp={p.pp} x cp={p.cp} x dp={p.dp} = {p.gpus}, not gpus={gpus}",
            )
        )
    out += _tp_problems(model, p)
    # How many chunks the layers can fill is the engine's split policy (engine/split.py): Megatron and
    # torchtitan let the embedding and the loss fill a chunk of their own.
    if p.seq_len % p.cp:
        out.append(Rejected("cp does not divide seq len", f"cp={p.cp} must divide seq_len={p.seq_len}"))
    if p.seq_len > model.max_seq_len and model.position_embedding == "learned":
        out.append(
            Rejected(
                "seq len beyond learned positions",
                f"seq_len={p.seq_len} exceeds max_seq_len={model.max_seq_len} of the learned position table",
            )
        )
    if p.ep > 1:
        out += _ep_problems(model, p)
    elif model.moe is not None:
        out += _folding_problems(p)  # etp folds with ep = 1 too
    if p.etp is not None and p.etp != p.tp and model.moe is None:
        out.append(Rejected("etp without experts", f"etp={p.etp} needs an MoE model; {model.name} has no experts"))
    if p.sp and p.tp == 1:
        out.append(Rejected("sp needs tp > 1", "sp (sequence parallelism) needs tp > 1; set --no-sp or tp > 1"))
    elif p.sp and p.seq_len % p.cp == 0 and (p.seq_len // p.cp) % p.tp:
        # each tp rank holds an equal slice of its cp rank's sequence: Megatron-Core _split_along_first_dim
        # (tensor_parallel/mappings.py) and torchtitan's seq_len_divisor (parallel_dims.py, v0.2.2) assert it
        local = f"seq_len/cp = {p.seq_len // p.cp}" if p.cp > 1 else f"seq_len={p.seq_len}"
        out.append(Rejected("tp does not divide the sequence (sp)", f"sp: tp={p.tp} must divide {local}"))
    return out + _schedule_problems(p)


def _tp_problems(model: ModelSpec, p: Plan) -> list[Rejected]:
    """tp splits the attention heads (or replicates the kv heads) and every FFN width."""
    out: list[Rejected] = []
    heads, kv = model.num_attention_heads, model.kv_heads
    if heads % p.tp:
        out.append(
            Rejected(
                "tp does not divide heads",
                f"tp={p.tp} must divide num_attention_heads={heads} (try tp in {_near(heads)})",
            )
        )
    elif kv % p.tp and p.tp % kv:
        out.append(
            Rejected(
                "tp does not divide kv heads",
                f"tp={p.tp} must divide num_kv_heads={kv}, or be a multiple of it so kv heads are replicated",
            )
        )
    etp = p.expert_tp
    ffns = [(model.ffn_hidden_size, "tp", p.tp)]
    if model.moe:
        ffns.append((model.moe.expert_ffn_hidden_size, "tp" if p.etp is None else "etp", etp))
    for ffn, name, degree in ffns:
        if ffn % degree:
            out.append(
                Rejected(
                    f"{name} does not divide ffn",
                    f"{name}={degree} must divide ffn_hidden_size={ffn} (try {_near(ffn)})",
                )
            )
    return out


def _ep_problems(model: ModelSpec, p: Plan) -> list[Rejected]:
    """ep > 1 needs experts it divides, within dp·cp (or, with its own etp, ep·etp within tp·cp·dp)."""
    out: list[Rejected] = []
    if model.moe is None:
        out.append(Rejected("ep without experts", f"ep={p.ep} needs an MoE model; {model.name} has no experts"))
    elif model.moe.num_experts % p.ep:
        out.append(
            Rejected(
                "ep does not divide experts",
                f"ep={p.ep} must divide num_experts={model.moe.num_experts} (try {_near(model.moe.num_experts)})",
            )
        )
    return out + _folding_problems(p)


def _folding_problems(p: Plan) -> list[Rejected]:
    """The expert layers fold ep x etp x EDP onto the tp x cp x dp ranks (with etp = tp: ep into dp x cp)."""
    out: list[Rejected] = []
    if p.etp is None or p.etp == p.tp:
        if (p.dp * p.cp) % p.ep:
            out.append(
                Rejected("ep does not fit in dp x cp", f"ep={p.ep} must divide dp={p.dp} x cp={p.cp} = {p.dp * p.cp}")
            )
    elif (p.tp * p.cp * p.dp) % (p.ep * p.etp):
        out.append(
            Rejected(
                "ep x etp does not fit in tp x cp x dp",
                f"ep={p.ep} x etp={p.etp} must divide tp={p.tp} x cp={p.cp} x dp={p.dp} = {p.tp * p.cp * p.dp} "
                "(Megatron's MoE parallel folding: EP x ETP x EDP = TP x CP x DP)",
            )
        )
    return out


def _schedule_problems(p: Plan) -> list[Rejected]:
    """vpp > 1 only interleaved or DualPipeV (exactly 2), and those only with pp > 1."""
    if p.schedule == "dualpipev":
        if p.pp < 2 or p.vpp != 2:
            return [
                Rejected(
                    "dualpipev needs pp > 1 and vpp 2",
                    f"schedule=dualpipev runs two chunks per rank in a V over pp > 1 ranks, got pp={p.pp}"
                    + ("" if p.vpp == 2 else f", vpp={p.vpp}"),
                )
            ]
    elif p.schedule == "interleaved":
        if p.pp == 1 or p.vpp == 1:
            return [
                Rejected(
                    "interleaved needs pp > 1 and vpp > 1",
                    f"vpp={p.vpp} splits each pipeline stage into virtual stages: it needs pp > 1, got pp=1"
                    if p.pp == 1 and p.vpp > 1  # vpp alone: interleaved by default (plan.py), not the user's word
                    else f"schedule=interleaved needs pp > 1 and vpp > 1, got pp={p.pp}, vpp={p.vpp}",
                )
            ]
    elif p.vpp > 1:
        return [
            Rejected(
                "vpp needs the interleaved schedule", f"vpp={p.vpp} > 1 needs schedule=interleaved, not {p.schedule}"
            )
        ]
    return []
