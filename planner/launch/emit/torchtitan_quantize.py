"""torchao's converters for the plan's precision, as each torchtitan release spells them: v0.2.2's job-config
sections (quantize.linear.float8 with its recipe_name, quantize.linear.mx, quantize.grouped_mm.mx) and 0.3.0's
model_registry converters (components/quantization/float8.py Float8LinearConverter.Config, whose recipe_name is
rowwise or rowwise_with_gw_hp). A named recipe is priced with the output layer in bf16 (precision.head_precision),
which float8's converter quantizes unless filtered (filter_fqns defaults to [] in both releases; torchtitan's own
recipes filter it: v0.2.2's llama3 train configs "output", 0.3.0's llama3_405b "lm_head"); plain fp8 is priced with
it in fp8."""

from __future__ import annotations

from planner.errors import PlannerError
from planner.plan import Plan
from planner.precision import TORCHAO_FLOAT8_RECIPES, head_precision
from planner.specs import ModelSpec

V02_RELEASE = "v0.2.2"
FLOAT8 = "quantize.linear.float8"
V02_SECTIONS = {  # each converter's section (float8's: _float8_lines); MXLinear's default recipe, said; the experts'
    "quantize.linear.mx": ['recipe_name = "mxfp8_cublas"'],
    "quantize.grouped_mm.mx": ['recipe_name = "mxfp8"', 'fqns = ["experts"]'],  # grouped GEMMs, as priced
}


def v02_converters(model: ModelSpec, plan: Plan, *, compiled: bool) -> list[str]:
    """v0.2.2's converters for the plan's recipe: float8 (tensorwise, rowwise or rowwise_with_gw_hp) for nn.Linear;
    mxfp8 for nn.Linear and, with experts, their grouped GEMMs (components/quantization/mx.py MXLinearConverter,
    MXGroupedMMConverter), which asserts "TP not yet supported with torch.compile for mxfp8"; `compiled`: the plan
    compiles the model."""
    if plan.precision in TORCHAO_FLOAT8_RECIPES:
        return [FLOAT8]
    if plan.precision != "mxfp8":
        return []
    if plan.tp > 1 and compiled:
        raise PlannerError(
            f"--emit torchtitan-v0.2: torchtitan {V02_RELEASE} asserts 'TP not yet supported with torch.compile for "
            "mxfp8' (components/quantization/mx.py): price the plan eager (no compile), or at tp 1"
        )
    return ["quantize.linear.mx", *(["quantize.grouped_mm.mx"] if model.moe is not None else [])]


def v02_sections(converters: list[str], precision: str) -> list[str]:
    """The converters' job-config sections."""
    sections = {c: _float8_lines(precision) if c == FLOAT8 else V02_SECTIONS[c] for c in converters}
    return [line for c, body in sections.items() for line in ("", f"[{c}]", *body)]


def _float8_lines(precision: str) -> list[str]:
    """v0.2.2's float8 section: torchao's recipe for the precision, and the output layer filtered where it is
    priced in bf16."""
    head = ['filter_fqns = ["output"]'] if head_precision(precision) != precision else []
    return [f'recipe_name = "{TORCHAO_FLOAT8_RECIPES[precision]}"', *head]


def registry_converters(plan: Plan, *, compiled: bool) -> tuple[list[str], str]:
    """0.3.0: (the import the converters need, model_registry's converters argument) — Float8LinearConverter for a
    rowwise recipe, named; None for 16- and 32-bit plans (the file refuses tensorwise first: torchtitan.
    format_problems); `compiled`: the plan compiles the model (model_compile_enabled)."""
    recipe = TORCHAO_FLOAT8_RECIPES.get(plan.precision)
    if recipe is None or recipe == "tensorwise":
        return [], "None"
    head = ', filter_fqns=["lm_head"]' if head_precision(plan.precision) != plan.precision else ""
    converter = f'Float8LinearConverter.Config(recipe_name="{recipe}"{head}, model_compile_enabled={compiled})'
    return ["from torchtitan.components.quantization import Float8LinearConverter"], f"[{converter}]"
