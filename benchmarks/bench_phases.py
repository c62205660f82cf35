"""Where one `planner search` process spends its time: the phases the README's Speed section names, each timed in a
fresh process (nothing cached from a previous run), median of several.

    python benchmarks/bench_phases.py [--runs N] [MODEL GPUS]      # default: gpt3-175b 1024

Phases, in the order a search runs them:
- libraries: importing typer, rich, pydantic and yaml, and building one pydantic model (pydantic imports its
  schema machinery then): what no change to the planner removes;
- planner imports: the modules `planner search` loads, with their frozen dataclasses and pydantic models;
- catalogs: the model, the hardware and the engine profile read and validated, and the search space;
- search: candidates, rules, memory screen, step times and ranking (explore/pipeline.py `search`);
- table: the ranked table and the rejection counts rendered as the CLI renders them (100 columns).
The process's start-up before the first import and its exit are not in these; `bench_search.py` times whole
processes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

PROBE = r"""
import io, json, sys, time
t0 = time.perf_counter()
import typer, rich.console, rich.table, pydantic, yaml
class _First(pydantic.BaseModel):  # pydantic imports its schema machinery when the first model is built
    x: int = pydantic.Field(gt=0)
t1 = time.perf_counter()
import planner.cli.search, planner.api
t2 = time.perf_counter()
from planner.api.resolve import resolve_engines
from planner.api.searching import SEARCH_OPTIONS, make_space
from planner.io.catalog import load_hardware, load_model
model, hw = load_model(sys.argv[1]), load_hardware("h100-sxm")
engine = resolve_engines(None, {})[0]
space = make_space(model, int(sys.argv[2]), dict.fromkeys(SEARCH_OPTIONS))
t3 = time.perf_counter()
from planner.explore.pipeline import search
result = search(model, hw, space, engine)
t4 = time.perf_counter()
from rich.console import Console
from planner.render.ranking import print_result
print_result(Console(file=io.StringIO(), width=100, highlight=False), result)
t5 = time.perf_counter()
print(json.dumps({"libraries": t1 - t0, "planner imports": t2 - t1, "catalogs": t3 - t2, "search": t4 - t3,
                  "table": t5 - t4}))
"""


def phases(model: str, gpus: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", PROBE, model, str(gpus)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("model", nargs="?", default="gpt3-175b")
    ap.add_argument("gpus", nargs="?", type=int, default=1024)
    args = ap.parse_args()
    runs = [phases(args.model, args.gpus) for _ in range(args.runs)]
    print(f"{args.model} on {args.gpus} h100-sxm, median of {args.runs} fresh processes:")
    for name in runs[0]:
        print(f"  {name:16} {statistics.median(r[name] for r in runs):6.3f} s")
    print(f"  {'sum':16} {statistics.median(sum(r.values()) for r in runs):6.3f} s")


if __name__ == "__main__":
    main()
