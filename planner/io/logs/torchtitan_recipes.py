"""What a torchtitan log states that the plan cannot say as it was run, read from its set-up lines: the
low-precision recipe its converters print, HSDP's shard group, and an MFU printed against another GPU's peak."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from planner.io.logs.log_text import Step
from planner.precision import TORCHAO_FLOAT8_RECIPES

# What torchtitan's low-precision converters print (components/quantization/): float8.py "Float8 tensorwise scaled
# training active" (v0.1.0-v0.2.2, torchao's tensorwise dynamic scaling: the profile's plain fp8) and "Float8 training
# active with recipe NAME" (rowwise: fp8-rowwise; rowwise_with_gw_hp: fp8-rowwise-gw-hp; main's only float8
# recipes); mx.py "Float8 training active
# with recipe NAME" (v0.1.0) or "MX training active with recipe NAME" (v0.2.x) with an MX recipe (mxfp8, mxfp8_cublas)
# and, on main, "Converted Linear layers to MXFP8Linear" / "... to NVFP4Linear" (nvfp4.py).
TENSORWISE_LINE = "Float8 tensorwise scaled training active"
PLAIN_LINE = "Float8 training active"  # before v0.1.0 (pytorch/torchtitan pull request #812, 2025-01): tensorwise
RECIPE_LINE = re.compile(r"(?:Float8|MX) training active with recipe (\w+)")
CONVERTED = re.compile(r"Converted Linear layers to (MXFP8|NVFP4)Linear")
UNPRICED = (
    "names a float8 recipe no precision of the planner is (fp8 is torchao's tensorwise scaling, fp8-rowwise its "
    "rowwise, fp8-rowwise-gw-hp its rowwise_with_gw_hp, mxfp8 its MX)"
)
# torchao's recipe name -> the precision it reads as; tensorwise, which fp8 and fp8-current both run, reads as plain
# fp8 (as the runs were calibrated), said here rather than left to the mapping's order
FLOAT8_RECIPES = {"tensorwise": "fp8"} | {name: p for p, name in TORCHAO_FLOAT8_RECIPES.items() if name != "tensorwise"}


def low_precision(text: str) -> tuple[str | None, str] | None:
    """The precision a torchtitan converter line states, with the line (None: no converter line, a 16- or 32-bit
    run); a precision of None: a recipe name no precision of the planner is, left unstated."""
    if TENSORWISE_LINE in text:
        return "fp8", TENSORWISE_LINE
    if m := CONVERTED.search(text):
        return m.group(1).lower(), m.group(0)
    if m := RECIPE_LINE.search(text):
        recipe = m.group(1)
        return ("mxfp8" if recipe.startswith("mxfp8") else FLOAT8_RECIPES.get(recipe)), m.group(0)
    if PLAIN_LINE in text:
        return "fp8", PLAIN_LINE
    return None


def recipe_notes(text: str, plan: dict[str, Any], mesh: dict[str, int]) -> list[str]:
    """What the run states that its plan does not price, each said: a float8 recipe no precision is (left
    unstated), HSDP's shard group (the plan's ZeRO shards over every data-parallel rank)."""
    out = []
    if plan["precision"] is None and (found := low_precision(text)) and found[0] is None:
        out.append(f"precision: not stated: '{found[1]}' {UNPRICED}; give --plan with a precision to price it as")
    replicate, shard = mesh.get("dp_replicate", 1), mesh.get("dp_shard", 1)
    if replicate > 1 and shard > 1 and plan["zero"] in (2, 3):
        out.append(
            f"zero: {plan['zero']} over dp={plan['dp']}; the run is HSDP, sharding over dp_shard={shard} and "
            f"replicating over dp_replicate={replicate}, which no plan field says: each GPU holds {replicate}x the "
            "sharded states the plan prices"
        )
    return out


# tools/utils.py get_peak_flops (v0.2.2 l.143): a device it has no peak for is given the A100's, and every metrics
# line's mfu is then against that peak (a T4 printed 0.16%): not the run's MFU.
PEAK_FALLBACK = re.compile(r"Peak flops undefined for: (.+?), fallback to (\w+)")


def peak_fallback(text: str, steps: list[Step]) -> tuple[list[Step], list[str]]:
    """The steps without the MFU torchtitan printed against another GPU's peak, and a note saying so."""
    m = PEAK_FALLBACK.search(text)
    if m is None:
        return steps, []
    note = f"mfu: torchtitan has no peak for {m.group(1)} and printed its MFU against the {m.group(2)}'s: left out"
    return [replace(s, mfu=None) for s in steps], [note]
