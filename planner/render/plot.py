"""`planner search --plot`: throughput vs memory per GPU of every valid plan, the Pareto front, the chosen
plan; and what every drawing command shares: matplotlib (the optional extra `plot`, imported only when asked), the
file names it writes, and the write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planner.errors import PlannerError
from planner.io.files import check_writable, recorded

FIGURE_SUFFIXES = (".svg", ".png", ".pdf")


def pyplot(option: str = "--plot") -> Any:
    """matplotlib.pyplot on the file-only Agg backend, or one line saying how to install it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlannerError(f"{option} needs matplotlib: pip install 'planner[plot]'") from None
    return plt


def check_figure_path(path: str, option: str = "--plot") -> None:
    """Before any work: matplotlib is installed, the file name says a format it writes, and the file can be written
    there (a file where its folder would be was 'File exists' after the searches: audit)."""
    pyplot(option)
    if not path.lower().endswith(FIGURE_SUFFIXES):
        raise PlannerError(f"{option} {path!r}: the file name must end in .svg, .png or .pdf")
    check_writable(path, what=option.removeprefix("--"))


def plot_search(result: Any, path: str) -> None:
    plt = pyplot()
    from planner.explore.results import pareto_front

    pts = [(t.nbytes / 2**30, t.tokens_per_s / result.space.gpus) for t in result.all_timed]
    fig, ax = plt.subplots(figsize=(8, 5))
    if pts:
        ax.scatter(
            [x for x, _ in pts],
            [y for _, y in pts],
            s=8,
            alpha=0.35,
            color="tab:blue",
            label=f"valid plans ({len(pts)})",
        )
        front = pareto_front(pts)
        ax.plot(
            [pts[i][0] for i in front],
            [pts[i][1] for i in front],
            "-o",
            color="tab:orange",
            ms=3,
            label="Pareto front (less memory, more throughput)",
        )
    best = result.best
    if best is not None:
        ax.scatter(
            [best.estimate.memory.total_bytes / 2**30],
            [best.time.tokens_per_s_per_gpu],
            marker="*",
            s=220,
            color="tab:red",
            zorder=5,
            label=f"chosen: {best.plan.summary()}",
        )
    ax.axvline(result.hardware.gpu.hbm_bytes / 2**30, color="grey", ls="--", lw=1, label="GPU memory")
    ax.set_xlabel("memory per GPU (GiB, most loaded stage)")
    ax.set_ylabel("tokens/s per GPU")
    ax.set_title(f"{result.model.name} on {result.space.gpus} x {result.hardware.name}")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    save_figure(fig, path)


def save_figure(fig: Any, path: str) -> None:
    """Write a matplotlib figure and close it (parent folders created, as every file the commands write); an
    unwritable path is one PlannerError line."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        recorded(Path(path))
        fig.savefig(path)
    except OSError as e:
        raise PlannerError(f"cannot write {path!r}: {e.strerror}") from None
    finally:
        plt.close(fig)
