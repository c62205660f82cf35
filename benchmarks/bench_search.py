"""Benchmark `planner search`: the whole CLI process (Python start-up included) and the search inside it (the
`seconds` its JSON reports), after the floor: a process that only imports the libraries the CLI is built on.

    python benchmarks/bench_search.py [--runs N] [--catalog]
    python benchmarks/bench_search.py --ab OTHER_CHECKOUT [--runs N]   # A/B, interleaved

Headline cases (issues 11 and 19): one engine <= 0.5 s whole process for the catalog's models at their usual
scale (gpt3-175b on 1024 GPUs, mixtral-8x22b on 256 named), `--engine all` <= 1 s for gpt3-175b on 1024 GPUs and
mixtral-8x7b on 256, on a 2-core machine; issue 23: llama3-405b on 131,072 GPUs <= 0.5 s (the
search; with advice, a few top-1 searches more); issue 20: DeepSeek-V3 on 2,048 H800 <= 1 s.

On a shared, loaded machine absolute times drift with the load: `--ab` runs this checkout and another one (a
`git archive` of main, say) alternately, case by case, and prints the medians of both side by side, so the
comparison sees the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CASES = [
    ("gpt3-175b", 1024, []),
    ("llama3-405b", 16384, []),
    ("llama3-70b", 1024, []),
    ("llama3-8b", 64, []),
    ("gpt3-175b", 1024, ["--hardware", "a100-80gb", "--global-batch", "1536"]),
    ("mixtral-8x7b", 256, []),
    ("mixtral-8x22b", 256, []),
    ("gpt3-175b", 1024, ["--engine", "all"]),
    # issue 20 items 4-5: a named precision recipe, and each engine's recipe options as variants
    ("gpt3-175b", 1024, ["--precision", "fp8-current"]),
    ("gpt3-175b", 1024, ["--recipe-options"]),
    ("mixtral-8x7b", 256, ["--recipe-options"]),
    ("mixtral-8x7b", 256, ["--engine", "all"]),
    ("mixtral-8x7b", 256, ["--engine", "all", "--seq-len", "32768"]),  # issue 19's case before seq-len defaulted
    # issue 23 item 6: 131,072 GPUs, the search alone (<= 0.5 s), on a 2:1 fat tree, and with the advice its
    # mismatched default batch triggers (a few more top-1 searches: explore/advice.py)
    ("llama3-405b", 131072, ["--no-advice"]),
    ("llama3-405b", 131072, ["--cluster", "rail-fat-tree-2to1", "--no-advice"]),
    ("llama3-405b", 131072, []),
    # issue 20 item 7: DeepSeek-V3 on 2,048 H800 with EP, ETP, PP, recompute modules and a precision recipe (the
    # README's search)
    ("deepseek-v3", 2048, [
        "--hardware", "h800", "--engine", "hai-llm", "--seq-len", "4096", "--global-batch", "15360",
        "--precision", "fp8-blockwise", "--recompute-modules", "layernorm,mla_up_proj,moe_act",
        "--precision-aware-optimizer", "--optimizer-moment-dtype", "bf16", "--schedule", "1f1b,dualpipev",
    ]),
]  # fmt: skip
# What no change to the planner can remove from a whole process: Python's start-up and the imports of the
# libraries the CLI is built on. Printed first, so the whole-process figures can be read against the machine.
FLOOR = (
    "import typer, rich.console, rich.table, pydantic, yaml\n"
    "class First(pydantic.BaseModel):\n    x: int = pydantic.Field(gt=0)"  # pydantic's schema machinery loads here
)
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this checkout

# Every catalog model at its usual scale (--catalog): the published run's GPU count where there is one, else a
# count of the same order for the size. BLOOM 176B: 384 A100 (BigScience 2022); MT-NLG 530B: 2240 A100 (Smith et
# al. 2022); Megatron 1T: 3072 A100 (Narayanan et al. 2021, Table 1); GPT-3 175B: 1024 (ibid.); Llama 3 405B:
# 16384 H100 (Dubey et al. 2024); Mixtral: 256 (issue 11). OPT-175B ran on 992 A100 (Zhang et al. 2022), where no
# plan takes a power-of-two global batch (992 = 31 x 32): it is timed on 1024. DeepSeek-V3: 2048 H800 (DeepSeek-V3
# technical report, section 3.1); Llama 3.1 as Llama 3. The other 2026 models' reports give no GPU count: a count of
# the same order for the total size (Kimi-K2 as DeepSeek-V3).
USUAL_GPUS = {
    "tiny": 8, "gpt3-125m": 8, "gpt3-350m": 16, "gpt3-760m": 32, "gpt3-1.3b": 32, "gpt2-1.5b": 32,
    "gpt3-2.7b": 64, "gpt3-6.7b": 64, "llama2-7b": 64, "llama3-8b": 64, "gpt3-13b": 128, "llama2-13b": 128,
    "llama2-70b": 1024, "llama3-70b": 1024, "gpt3-175b": 1024, "opt-175b": 1024, "bloom-176b": 384,
    "mixtral-8x7b": 256, "mixtral-8x22b": 256, "llama3-405b": 16384, "mt-nlg-530b": 2240, "megatron-1t": 3072,
    "llama3.1-8b": 64, "llama3.1-70b": 1024, "llama3.1-405b": 16384, "qwen3-8b": 64, "gpt-oss-20b": 64,
    "qwen3-30b-a3b": 128, "gemma3-27b": 256, "qwen3-32b": 256, "nemotron-h-8b": 64, "nemotron-h-56b": 1024,
    "gpt-oss-120b": 256, "llama4-scout": 256, "qwen3-235b-a22b": 1024, "llama4-maverick": 1024,
    "deepseek-v3": 2048, "kimi-k2": 2048,
}  # fmt: skip
# Models the default engine (Megatron) does not train, on the engine that trained them: BLOOM's ALiBi positions ran on
# Megatron-DeepSpeed's BigScience fork, which no engine profile is; DeepSpeed trains the Hugging Face module.
USUAL_ENGINE = {"bloom-176b": ["--engine", "deepspeed"]}


def floor_s(runs: int) -> float:
    """Median wall seconds of a process that only starts Python and imports the CLI's libraries (FLOOR)."""
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", FLOOR], check=True)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def cli_run(model: str, gpus: int, extra: list[str], tree: str = HERE) -> tuple[float, dict]:
    """Seconds of one whole `planner search --json` process of the checkout at `tree`, and its document."""
    cmd = [sys.executable, "-m", "planner", "search", "--model", model, "--gpus", str(gpus), "--json", *extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (tree, os.environ.get("PYTHONPATH"))))}
    t0 = time.perf_counter()  # run in the checkout: `python -m` puts the working directory first on sys.path
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, cwd=tree)
    return time.perf_counter() - t0, json.loads(proc.stdout)


def cpu_run(model: str, gpus: int, extra: list[str], tree: str) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds of the process: user + system, its document): the CPU time moves less than the
    wall time with the load of a shared machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, doc = cli_run(model, gpus, extra, tree)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, doc


def _older(extra: list[str]) -> list[str]:
    """A case's flags without those of issue 23 (for a checkout before them: its search had no advice, no cluster)."""
    out, skip = [], False
    for x in extra:
        if skip:
            skip = False
        elif x == "--cluster":
            skip = True
        elif x != "--no-advice":
            out.append(x)
    return out


def ab(other: str, runs: int, gpus: int | None = None) -> None:
    """Each case run alternately by this checkout (A) and `other` (B), `runs` times each: medians of the wall
    and CPU seconds of the whole process. B runs a case without issue 23's flags when it does not know them."""
    print(f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}; A = {HERE}, B = {other}")
    print(f"{'case':58} {'wall A':>7} {'wall B':>7} {'cpu A':>7} {'cpu B':>7} {'A/B':>5} {'A evaluated':>11}")
    for model, count, extra in [c for c in CASES if gpus is None or c[1] == gpus]:
        a: list[tuple[float, float]] = []
        b: list[tuple[float, float]] = []
        doc: dict = {}
        for _ in range(runs):
            wall, cpu, doc = cpu_run(model, count, extra, HERE)
            a.append((wall, cpu))
            try:
                b.append(cpu_run(model, count, extra, other)[:2])
            except subprocess.CalledProcessError:
                b.append(cpu_run(model, count, _older(extra), other)[:2])
        name = f"{model} x {count} {' '.join(extra)}"
        wa, wb = (statistics.median(w for w, _ in x) for x in (a, b))
        ca, cb = (statistics.median(c for _, c in x) for x in (a, b))
        print(f"{name:58} {wa:6.3f}s {wb:6.3f}s {ca:6.3f}s {cb:6.3f}s {ca / cb:5.2f} {doc['evaluated']:>11}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--catalog", action="store_true", help="every catalog model at its usual scale instead")
    ap.add_argument("--gpus", type=int, help="only the cases on this many GPUs")
    ap.add_argument("--ab", metavar="CHECKOUT", help="compare with another checkout, runs interleaved")
    args = ap.parse_args()
    if args.ab:
        ab(args.ab, args.runs, args.gpus)
        return
    from planner.io.catalog import list_models

    print(f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    print(f"floor (python -c: import typer, rich, pydantic, yaml; one pydantic model): {floor_s(args.runs):.3f}s wall")
    print(
        f"{'case':48} {'wall med':>9} {'wall min':>9} {'search':>8} {'evaluated':>9} {'timed':>6} "
        f"{'plans/s (wall)':>15}"
    )
    missing = set(list_models()) - set(USUAL_GPUS)
    if args.catalog and missing:
        raise SystemExit(f"no usual scale for {sorted(missing)}: add them to USUAL_GPUS")
    cases = [(m, g, USUAL_ENGINE.get(m, [])) for m, g in USUAL_GPUS.items()] if args.catalog else CASES
    cases = [c for c in cases if args.gpus is None or c[1] == args.gpus]
    for model, gpus, extra in cases:
        walls, searches, doc = [], [], {}
        for _ in range(args.runs):
            w, doc = cli_run(model, gpus, extra)
            walls.append(w)
            searches.append(doc["seconds"])  # the search inside the process, as the command reports it
        med = statistics.median(walls)
        name = f"{model} x {gpus} {' '.join(extra)}"
        print(
            f"{name:48} {med:8.3f}s {min(walls):8.3f}s {statistics.median(searches):7.3f}s {doc['evaluated']:>9} "
            f"{doc['timed']:>6} {doc['evaluated'] / med:>15,.0f}"
        )


if __name__ == "__main__":
    main()
