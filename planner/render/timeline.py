"""`estimate --timeline FILE`: one step's pipeline schedule, stages × time (matplotlib, imported here only).

The schedule is simulated from the estimate's per-micro-batch times: forward f, backward b (+ recompute),
each op waiting for its predecessor on the previous (forward) or next (backward) stage. 1F1B runs
p − s − 1 warm-up forwards on stage s, then alternates; GPipe runs every forward, then every backward
(Narayanan et al. 2021, Figures 3-4). Interleaved plans are drawn as 1F1B over p·v virtual stages
folded onto p ranks.
"""

from __future__ import annotations

from typing import Any

MAX_DRAWN_MICROBATCHES = 32


def _order(schedule: str, stage: int, stages: int, m: int) -> list[tuple[str, int]]:
    if schedule == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warm = min(stages - stage - 1, m)
    ops = [("F", i) for i in range(warm)]
    f, b = warm, 0
    while b < m:
        if f < m:
            ops.append(("F", f))
            f += 1
        ops.append(("B", b))
        b += 1
    return ops


def simulate(
    *, stages: int, m: int, f_s: float, b_s: float, schedule: str
) -> list[list[tuple[str, int, float, float]]]:
    """Per stage, the ops (kind, micro-batch, start, end) of one step."""
    done: dict[tuple[str, int, int], float] = {}
    orders = [_order(schedule, s, stages, m) for s in range(stages)]
    pos = [0] * stages
    clock = [0.0] * stages
    out: list[list[tuple[str, int, float, float]]] = [[] for _ in range(stages)]
    progressed = True
    while progressed:
        progressed = False
        for s in range(stages):
            while pos[s] < len(orders[s]):
                kind, i = orders[s][pos[s]]
                dep = (
                    (("F", s - 1, i) if s > 0 else None)
                    if kind == "F"
                    else (("B", s + 1, i) if s < stages - 1 else ("F", s, i))
                )
                if dep is not None and dep not in done:
                    break
                start = max(clock[s], done.get(dep, 0.0) if dep else 0.0)
                end = start + (f_s if kind == "F" else b_s)
                done[(kind, s, i)] = end
                clock[s] = end
                out[s].append((kind, i, start, end))
                pos[s] += 1
                progressed = True
    return out


def draw_timeline(est: Any, path: str) -> None:
    from planner.render.plot import pyplot

    plt = pyplot("--timeline")  # the file name was checked before the estimate (cli/sizing.py)
    plan, t = est.plan, est.time
    m_all = plan.num_microbatches
    v = plan.vpp if plan.schedule == "interleaved" else 1
    stages = plan.pp * v
    m = min(m_all, MAX_DRAWN_MICROBATCHES)
    per_mb = (t.compute_s + sum(s for k, s in t.exposed_comm_s.items() if k != "dp")) / m_all / v
    f_s = per_mb / 3  # backward is about twice the forward (two GEMMs per forward GEMM)
    b_s = 2 * per_mb / 3 + t.recompute_s / m_all / v
    ops = simulate(stages=stages, m=m, f_s=f_s, b_s=b_s, schedule="gpipe" if plan.schedule == "gpipe" else "1f1b")
    fig, ax = plt.subplots(figsize=(12, 1 + 0.4 * plan.pp))
    colors = {"F": "#4c78a8", "B": "#f58518"}
    end = 0.0
    for s, stage_ops in enumerate(ops):
        rank = s % plan.pp
        for kind, i, start, stop in stage_ops:
            ax.barh(rank, stop - start, left=start, color=colors[kind], edgecolor="white", linewidth=0.3)
            if stop - start > 0.02 * (f_s + b_s) * m:
                ax.text((start + stop) / 2, rank, str(i), ha="center", va="center", fontsize=6, color="white")
            end = max(end, stop)
    tail = t.optimizer_s + t.exposed_comm_s.get("dp", 0.0)
    ax.barh(range(plan.pp), [tail] * plan.pp, left=end, color="#54a24b")
    ax.set_yticks(range(plan.pp), [f"stage {r}" for r in range(plan.pp)])
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    shown = "" if m == m_all else f" (first {m} of {m_all} micro-batches)"
    ax.set_title(
        f"{est.model.name}: {plan.summary()} {plan.schedule}{shown}; blue forward, orange backward"
        f"{' + recompute' if t.recompute_s else ''}, green exposed dp comm + optimizer; gaps are the bubble",
        fontsize=8,
    )
    from planner.render.plot import save_figure

    save_figure(fig, path)
