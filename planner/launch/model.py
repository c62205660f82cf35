"""A GPT-style decoder built from a ModelSpec, small enough to read in one sitting (torch).

Layers live in an ``nn.ModuleDict`` keyed by the global layer index, so a pipeline stage that deletes
the layers it does not own keeps the same parameter names (FQNs) and checkpoints reshard across layouts.
Attention computes the head count from the local shape (``view(B, T, -1, head_dim)``) so tensor
parallelism can split heads without the module knowing. RoPE tables are recomputed per call (no
buffers), which keeps FSDP and pipeline stages free of non-parameter state.

Initial values are a pure function of (seed, parameter name): the worker builds each stage on the meta
device, shards it, and fills only its own shards (``init_weights``), so a rank never holds the whole
model, and every layout starts from exactly the 1-process model's weights.

``positions`` (B, T) optionally gives each token's global position. Context parallelism needs it: each
cp rank holds a load-balanced, non-contiguous slice of the sequence (chunks r and 2·cp−1−r), so RoPE and
learned positions must use the sliced position ids, not ``arange`` of the local length.
"""

from __future__ import annotations

import zlib

import torch
import torch.nn.functional as F
from torch import nn

from planner.specs import ModelSpec


def _norm(model: ModelSpec) -> nn.Module:
    h = model.hidden_size
    return nn.RMSNorm(h, eps=1e-5) if model.norm == "rmsnorm" else nn.LayerNorm(h, eps=1e-5)


def rope(x: torch.Tensor, theta: float = 10000.0, positions: torch.Tensor | None = None) -> torch.Tensor:
    """Rotary position embedding on (B, T, heads, head_dim), half-split form (Su et al. 2021).

    positions: (B, T) global token positions; None means 0 … T−1 for every row.
    """
    t, d = x.shape[1], x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    if positions is None:
        ang = torch.outer(torch.arange(t, device=x.device, dtype=torch.float32), inv)[None]
    else:
        ang = positions.to(device=x.device, dtype=torch.float32)[..., None] * inv  # (B, T, d/2)
    cos, sin = ang.cos()[:, :, None, :].to(x.dtype), ang.sin()[:, :, None, :].to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, model: ModelSpec):
        super().__init__()
        h, hd, bias, qkv_bias = model.hidden_size, model.head_size, model.has_bias, model.has_qkv_bias
        self.head_dim, self.use_rope = hd, model.position_embedding == "rope"
        self.wq = nn.Linear(h, model.num_attention_heads * hd, bias=qkv_bias)
        self.wk = nn.Linear(h, model.kv_heads * hd, bias=qkv_bias)
        self.wv = nn.Linear(h, model.kv_heads * hd, bias=qkv_bias)
        self.wo = nn.Linear(model.num_attention_heads * hd, h, bias=bias)

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, -1, self.head_dim)
        k = self.wk(x).view(b, t, -1, self.head_dim)
        v = self.wv(x).view(b, t, -1, self.head_dim)
        if self.use_rope:
            q, k = rope(q, positions=positions), rope(k, positions=positions)
        rep = q.shape[2] // k.shape[2]  # grouped-query attention: share each kv head
        if rep > 1:
            k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, model: ModelSpec):
        super().__init__()
        h, f, bias = model.hidden_size, model.ffn_hidden_size, model.has_bias
        self.gated = model.mlp == "swiglu"
        self.w1 = nn.Linear(h, f, bias=bias)
        self.w3 = nn.Linear(h, f, bias=bias) if self.gated else None
        self.w2 = nn.Linear(f, h, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.w3 is not None:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))
        return self.w2(F.gelu(self.w1(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, model: ModelSpec):
        super().__init__()
        self.attention_norm, self.attention = _norm(model), Attention(model)
        self.ffn_norm, self.feed_forward = _norm(model), FeedForward(model)

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), positions=positions)
        return x + self.feed_forward(self.ffn_norm(x))


class Embedding(nn.Module):
    """Token embedding plus, for learned positions, the position table."""

    def __init__(self, model: ModelSpec):
        super().__init__()
        self.tok = nn.Embedding(model.vocab_size, model.hidden_size)
        self.pos = nn.Embedding(model.max_seq_len, model.hidden_size) if model.position_embedding == "learned" else None

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        h = self.tok(tokens)
        if self.pos is not None:
            h = h + self.pos(torch.arange(tokens.shape[1], device=tokens.device) if positions is None else positions)
        return h


class GPT(nn.Module):
    """tokens (B, T) → logits (B, T, V); a pipeline stage maps hidden states where parts are None."""

    def __init__(self, model: ModelSpec, *, tied: bool | None = None):
        super().__init__()
        self.embed: Embedding | None = Embedding(model)
        self.layers = nn.ModuleDict({str(i): Block(model) for i in range(model.num_layers)})
        self.norm: nn.Module | None = _norm(model)
        self.output: nn.Linear | None = nn.Linear(model.hidden_size, model.vocab_size, bias=False)
        self.tied = model.tied_embeddings if tied is None else tied
        if self.tied:
            self.output.weight = self.embed.tok.weight
        if self.output.weight.device.type != "meta":  # a meta model is filled after sharding (init_weights)
            self.reset_parameters()

    def retie(self) -> None:
        """Share the embedding with the output again where ``to_empty`` split them: moving a meta model to a real
        device allocates each module's parameters apart (nn.Module._apply builds a new Parameter per module when the
        tensor types differ), which left a tied model with two vocab x hidden matrices and their gradients and
        optimizer state, twice what was priced (FSDP2's own _apply keeps the tie)."""
        if self.tied and self.embed is not None and self.output is not None:
            self.output.weight = self.embed.tok.weight  # the same Parameter again (FSDP2 kept it: a no-op there)

    def reset_parameters(self, seed: int = 0) -> None:
        """GPT-2 style init (N(0, 0.02) weights, zero biases, unit norms), the same for every layout."""
        init_weights(self, seed)

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        # positions goes by keyword: TP's PrepareModuleInput checks positional inputs only.
        h = self.embed(x, positions=positions) if self.embed is not None else x
        for layer in self.layers.values():
            h = layer(h, positions=positions)
        h = self.norm(h) if self.norm is not None else h
        return self.output(h) if self.output is not None else h

    def keep_only(self, layer_ids: tuple[int, ...], *, first: bool, last: bool) -> GPT:
        """Cut this model down to one pipeline stage, in place."""
        for name in list(self.layers.keys()):
            if int(name) not in layer_ids:
                del self.layers[name]
        if not first:
            self.embed = None
        if not last:
            self.norm = self.output = None
        return self


def canonical_name(name: str) -> str:
    """A parameter's name in the plain 1-process model: wrappers (activation checkpointing) removed."""
    return name.replace("_checkpoint_wrapped_module.", "")


def initial_value(name: str, shape: tuple[int, ...], seed: int, device: torch.device) -> torch.Tensor:
    """The full initial tensor of parameter ``name``: a pure function of (seed, name, shape).

    Each parameter draws from its own generator, so a pipeline stage, a tensor-parallel shard or an
    FSDP shard holds exactly the values that the same parameter has in the 1-process model, without
    any rank ever building the whole model.
    """
    module, _, leaf = name.rpartition(".")
    if module.rpartition(".")[2].endswith("norm"):
        return (torch.ones if leaf == "weight" else torch.zeros)(shape, device=device)
    if leaf == "bias":
        return torch.zeros(shape, device=device)
    g = torch.Generator(device=device).manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    return torch.empty(shape, device=device).normal_(0.0, 0.02, generator=g)


@torch.no_grad()
def init_weights(model: nn.Module, seed: int) -> None:
    """Fill every parameter (plain, TP or FSDP DTensor) with its slice of ``initial_value``.

    The model may have been built on the meta device and moved with ``to_empty``: only this rank's
    shards are ever allocated, plus one full parameter at a time while it is sliced.
    """
    from torch.distributed.tensor import DTensor, distribute_tensor

    for name, param in model.named_parameters():
        full = initial_value(canonical_name(name), tuple(param.shape), seed, param.device)
        if isinstance(param, DTensor):  # local slice, no communication (src_data_rank=None)
            param.to_local().copy_(
                distribute_tensor(full, param.device_mesh, param.placements, src_data_rank=None).to_local()
            )
        else:
            param.copy_(full)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(0, 1))
