"""Capture what the commands print, to prove a reshaping changes nothing (or exactly what it says it changes).

    python benchmarks/capture_outputs.py capture DIR     # run every case, write DIR/<case>.txt
    python benchmarks/capture_outputs.py compare OLD NEW # list the cases whose outputs differ, with a diff

Run `capture` on the commit before a change and on the change (PYTHONPATH=<checkout> picks the tree), then
`compare`. Timings ("in 0.04 s", "seconds": 0.04) are masked; everything else must be identical. The cases cover
validate on the runs file, memory and estimate on every catalog model, searches over engines, objectives,
pruning, --explain and a plan that cannot fit, and the emitters.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path.cwd()  # the checkout being captured: run from its root, with PYTHONPATH pointing at it
RUNS = str(REPO / "tests" / "data" / "calibration_runs.yaml")

SEARCHES: dict[str, list[str]] = {
    "gpt3-a100": [
        "-m",
        "gpt3-175b",
        "--gpus",
        "1024",
        "--hardware",
        "a100-80gb",
        "--global-batch",
        "1536",
        "--seq-len",
        "2048",
        "--top",
        "5",
    ],
    "gpt3-default": ["-m", "gpt3-175b", "--gpus", "1024"],
    "gpt3-all": ["-m", "gpt3-175b", "--gpus", "1024", "--engine", "all"],
    "llama70-titan": ["-m", "llama3-70b", "--gpus", "256", "--engine", "torchtitan"],
    "llama8-mi300-titan": ["-m", "llama3-8b", "--gpus", "512", "--engine", "torchtitan", "--hardware", "mi300x"],
    "mixtral7-256": ["-m", "mixtral-8x7b", "--gpus", "256"],
    "mixtral7-all": ["-m", "mixtral-8x7b", "--gpus", "256", "--engine", "all", "--top", "8"],
    "mixtral22-256": ["-m", "mixtral-8x22b", "--gpus", "256", "--wide"],
    "llama405-16k": ["-m", "llama3-405b", "--gpus", "16384", "--seq-len", "8192"],
    "llama405-nofit": ["-m", "llama3-405b", "--gpus", "8"],
    "llama8-exhaustive": ["-m", "llama3-8b", "--gpus", "64", "--exhaustive", "--top", "15"],
    "llama8-memory": ["-m", "llama3-8b", "--gpus", "64", "--objective", "memory"],
    "llama70-goodput": ["-m", "llama3-70b", "--gpus", "512", "--objective", "goodput", "--mtbf-hours", "50000"],
    "gpt3-explain": ["-m", "gpt3-175b", "--gpus", "1024", "--explain", "tp=16"],
    "gpt3-deepspeed": ["-m", "gpt3-13b", "--gpus", "128", "--engine", "deepspeed,megatron-deepspeed"],
    "mpt-foundry": ["-m", "llama2-7b", "--gpus", "64", "--engine", "llm-foundry"],
    "bloom": [
        "-m",
        "bloom-176b",
        "--gpus",
        "384",
        "--zero",
        "1",
        "--recompute",
        "full,selective",
        "--engine",
        "deepspeed",
    ],
    "llama8-long": ["-m", "llama3-8b", "--gpus", "128", "--seq-len", "65536", "--global-batch", "64"],
    "gpt3-fp8": ["-m", "gpt3-175b", "--gpus", "1024", "--precision", "fp8", "--max-tp", "8"],
    "planner-engine": ["-m", "tiny", "--gpus", "8", "--engine", "planner", "--hardware", "cpu", "--global-batch", "32"],
}
PLANS: dict[str, list[str]] = {
    "gpt3-paper": [
        "-m",
        "gpt3-175b",
        "--gpus",
        "1024",
        "--tp",
        "8",
        "--pp",
        "16",
        "--no-sp",
        "--recompute",
        "full",
        "--precision",
        "fp16",
        "--no-flash",
        "--global-batch",
        "1536",
        "--hardware",
        "a100-80gb",
        "--tokens",
        "300e9",
        "--mtbf-hours",
        "50000",
    ],
    "llama70-stages": [
        "-m",
        "llama3-70b",
        "--gpus",
        "64",
        "--tp",
        "8",
        "--pp",
        "4",
        "--zero",
        "1",
        "--recompute",
        "selective",
        "--micro-batch",
        "1",
        "--global-batch",
        "512",
        "--seq-len",
        "8192",
    ],
    "mixtral-ep": [
        "-m",
        "mixtral-8x7b",
        "--gpus",
        "64",
        "--tp",
        "2",
        "--pp",
        "4",
        "--ep",
        "8",
        "--sp",
        "--global-batch",
        "256",
        "--seq-len",
        "4096",
    ],
    "titan-fsdp": [
        "-m",
        "llama3-8b",
        "--gpus",
        "8",
        "--engine",
        "torchtitan",
        "--zero",
        "3",
        "--recompute",
        "selective",
        "--seq-len",
        "8192",
        "--global-batch",
        "16",
    ],
}


def cases() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"validate": ["validate", RUNS], "validate-json": ["validate", RUNS, "--json"]}
    for name, args in SEARCHES.items():
        out[f"search-{name}"] = ["search", *args]
    out["search-json"] = ["search", *SEARCHES["mixtral7-256"], "--json"]
    for name, args in PLANS.items():
        out[f"estimate-{name}"] = ["estimate", *args]
        out[f"estimate-{name}-json"] = ["estimate", *args, "--json"]
        plan_args = args[: args.index("--tokens")] if "--tokens" in args else args
        out[f"memory-{name}"] = ["memory", *plan_args, "--per-stage"]
    models = sorted(p.stem for p in (REPO / "model_specs").glob("*.yaml")) if (REPO / "model_specs").is_dir() else []
    models = models or sorted(p.stem for p in (REPO / "planner" / "catalog" / "model_specs").glob("*.yaml"))
    for m in models:
        out[f"memory-{m}"] = ["memory", "-m", m, "--gpus", "8"]
        out[f"estimate-{m}-json"] = ["estimate", "-m", m, "--gpus", "8", "--json"]
    for target in ("megatron", "torchtitan", "deepspeed", "torchrun", "slurm", "k8s"):
        out[f"emit-{target}"] = [
            "launch",
            "--model",
            "llama3-8b",
            "--dp",
            "8",
            "--tp",
            "2",
            "--zero",
            "1",
            "--emit",
            target,
            "--out",
            "{out}",
        ]
    return out


MASKS = [
    (re.compile(r"in \d+\.\d+ s"), "in <t> s"),
    (re.compile(r'"seconds": [0-9.e+-]+'), '"seconds": <t>'),
    (re.compile(r"/tmp/tmp\w+"), "<tmp>"),
]


def run(args: list[str]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        argv = [a.replace("{out}", tmp) for a in args]
        env = {**os.environ, "COLUMNS": "120"}
        proc = subprocess.run([sys.executable, "-m", "planner", *argv], capture_output=True, text=True, env=env)
        text = f"exit {proc.returncode}\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}"
        for path in sorted(Path(tmp).rglob("*")):
            if path.is_file():
                text += f"--- file {path.relative_to(tmp)}\n{path.read_text()}"
    for rx, repl in MASKS:
        text = rx.sub(repl, text)
    return text


def capture(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, args in cases().items():
        (folder / f"{name}.txt").write_text(run(args))
        print(name, flush=True)


def compare(old: Path, new: Path) -> int:
    differ = 0
    for path in sorted(old.glob("*.txt")):
        other = new / path.name
        a = path.read_text().splitlines()
        b = other.read_text().splitlines() if other.is_file() else ["<missing>"]
        if a != b:
            differ += 1
            print(f"=== {path.stem}")
            print("\n".join(list(difflib.unified_diff(a, b, lineterm="", n=1))[:60]))
    print(f"{differ} of {len(list(old.glob('*.txt')))} cases differ")
    return 1 if differ else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "capture":
        capture(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
