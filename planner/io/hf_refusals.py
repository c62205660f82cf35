"""What a Hugging Face config.json holds that the model spec cannot represent, refused by name in one line (encoder-
decoder models, linear-attention layers, other SSM layouts, keys of parts without a spec field, expert counts under
names the import does not read, OPT's embedding projections), and the MLP activation it names, checked."""

from __future__ import annotations

import warnings

from planner.errors import PlannerError
from planner.io import hf_families as fam
from planner.io.hf_layout import HfConfig

# The MLP's activation, the first found: Gemma's hidden_activation before its legacy hidden_act (GemmaMLP builds
# ACT2FN[config.hidden_activation] where given, modeling_gemma.py; Gemma 2 and 3 give it alone).
ACTIVATION_KEYS = ("mlp_hidden_act", "hidden_activation", "hidden_act", "activation_function")


def activation(c: HfConfig) -> str | None:
    """The MLP's activation, lower case: the first of ACTIVATION_KEYS the config (or its family's defaults) gives."""
    found = next((c.get(k) for k in ACTIVATION_KEYS if c.get(k)), None)
    return None if found is None else str(found).lower()


def refuse(c: HfConfig) -> None:
    """One line naming what the spec cannot represent, and why."""
    family, src = c.family, c.source
    if c.get("is_encoder_decoder") or family in fam.ENCODER_DECODER_FAMILIES:
        raise PlannerError(
            f"{src}: model_type {family!r} is an encoder-decoder model; the planner models decoder-only stacks"
        )
    _refuse_linear_attention(c)
    if family in fam.OTHER_SSM_FAMILIES:
        raise PlannerError(
            f"{src}: model_type {family!r} has SSM layers in a layout other than nemotron_h's hybrid_override_pattern"
        )
    if c.get("use_qk_norm") and family not in fam.QK_NORM_FLAG_FAMILIES and family not in fam.QK_RMSNORM_FAMILIES:
        raise PlannerError(
            f"{src}: use_qk_norm in model_type {family!r}: which q/k norm it means (RMSNorm as GLM-4.5's, L2 as "
            "Llama 4's) is the family's, and the planner does not know this family's"
        )
    _refuse_unrepresented_keys(c)  # before the activation: Gemma 4 names its hidden_activation otherwise
    act = activation(c)
    if act is None and family not in fam.KNOWN_ACTIVATION_FAMILIES:
        raise PlannerError(
            f"{src}: no hidden_act, and the planner does not know the default of model_type {family!r}: add "
            "hidden_act (silu or swiglu: a gated MLP of three matrices; gelu or relu: two)"
        )
    if act is not None and act not in fam.ACTIVATION_NAMES:
        raise PlannerError(
            f"{src}: {c.key_of(*ACTIVATION_KEYS)}={act!r} is no activation transformers builds by name; known: "
            f"{', '.join(sorted(fam.ACTIVATION_NAMES))}"
        )
    for key, owner in fam.FAMILY_ONLY_KEYS.items():
        if c.raw.get(key) is not None and family != owner:
            raise PlannerError(
                f"{src}: {key} in model_type {family!r}: the importer reads it only as {owner}'s rule defines it"
            )
    _refuse_unread_experts(c)
    _opt_layout(c)
    if family not in fam.KNOWN_FAMILIES:
        warnings.warn(
            f"{src}: model_type {family!r} is not a family the importer has rules for: read from its keys as a "
            "decoder of attention and MLP layers; check its params against the published total",
            stacklevel=3,
        )


def _opt_layout(c: HfConfig) -> None:
    """OPT's embedding projections (OPTConfig.word_embed_proj_dim: project_in/project_out where it differs from
    hidden_size, OPT-350m's 512; audit: imported at 356M parameters, 331M published, unsaid)."""
    proj, hidden = c.integer("word_embed_proj_dim"), c.integer("hidden_size")
    if proj is not None and hidden is not None and proj != hidden:
        raise PlannerError(f"{c.source}: word_embed_proj_dim={proj} differs from hidden_size={hidden}: embedding "
                           "projections (OPT's project_in and project_out) are not representable")  # fmt: skip


def _refuse_linear_attention(c: HfConfig) -> None:
    """Linear-attention layers (Gated DeltaNet, KDA, MiniMax's Lightning), which the spec has no mixer for."""
    family, src, types = c.family, c.source, c.get("layer_types") or []
    if family != "nemotron_h" and (
        "linear_attention" in types or any(c.raw.get(k) is not None for k in fam.LINEAR_ATTENTION_KEYS)
    ):
        key = "layer_types" if "linear_attention" in types else next(k for k in fam.LINEAR_ATTENTION_KEYS if k in c.raw)
        raise PlannerError(
            f"{src}: {key} declares linear-attention (Gated DeltaNet) layers (model_type {family!r}); "
            "linear-attention mixers are not representable"
        )
    kinds = c.get("attn_type_list")  # MiniMax-M1 / Text-01: 0 a Lightning (linear) attention layer, 1 softmax
    if isinstance(kinds, list) and 0 in kinds:
        raise PlannerError(
            f"{src}: attn_type_list declares {kinds.count(0)} linear-attention (Lightning) layers of {len(kinds)} "
            f"(model_type {family!r}); linear-attention mixers are not representable"
        )


def _refuse_unrepresented_keys(c: HfConfig) -> None:
    """A key of a part the spec has no field for (hf_families.py UNREPRESENTED_KEYS), refused where its value says
    the part is there (0, false or an empty list say there is none); a long value is shown by its size."""
    for key, why in fam.UNREPRESENTED_KEYS.items():
        value = c.raw.get(key)
        if value is None or value is False or value == 0 or value == [] or value == {}:
            continue
        shown = (
            repr(value) if len(repr(value)) <= 60 else f"[{len(value)} entries]" if hasattr(value, "__len__") else "..."
        )
        raise PlannerError(f"{c.source}: {key}={shown}: {why} is not representable")


def _refuse_unread_experts(c: HfConfig) -> None:
    """An expert count under a name the import does not read (ERNIE 4.5's moe_num_experts) would import a MoE
    model as dense, its experts left out: refused naming the key; so is a shared-expert count or width under a name
    it does not read (ERNIE 4.5's moe_num_shared_experts), which would leave the shared experts out."""
    for key, value in c.raw.items():
        # a count or width, not a switch; "share": StepFun's share_expert_dim
        shared = "share" in key and ("expert" in key or "intermediate" in key)
        count = isinstance(value, int) and not isinstance(value, bool) and value > 0
        if shared and count and key not in fam.SHARED_EXPERT_KEYS:
            raise PlannerError(
                f"{c.source}: {key}={value}: shared experts under a name the import does not read (it reads "
                f"{', '.join(fam.SHARED_EXPERT_KEYS)}); imported it would leave them out"
            )
    if c.key_of(*fam.EXPERT_COUNT_KEYS):  # a count of 0 is read, and refused with a top-k (hf_moe.py)
        return
    top_k = c.key_of(*fam.TOP_K_KEYS)
    if top_k:
        raise PlannerError(
            f"{c.source}: {top_k}={c.get(top_k)!r} but no expert count (the import reads "
            f"{', '.join(fam.EXPERT_COUNT_KEYS)}); imported as dense it would leave the experts out"
        )
    for key, value in c.raw.items():
        if "expert" in key and isinstance(value, int) and not isinstance(value, bool) and value > 1:
            raise PlannerError(
                f"{c.source}: {key}={value}: an expert count under a name the import does not read (it reads "
                f"{', '.join(fam.EXPERT_COUNT_KEYS)}); imported as dense it would leave the experts out"
            )
