"""A hardware profile (hardware_profiles/NAME.yaml): the GPU, its node and NVLink domain, the link tiers, the
efficiency block, reserved memory and the plausibility ceiling."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, model_validator

from planner.errors import PlannerError
from planner.hardware.efficiency import Efficiency, LinkTier
from planner.hardware.gpu import GPUSpec, clock_fraction
from planner.precision import gemm_format
from planner.specs import Frozen, Precision


class ReservedMemory(Frozen):
    """Memory a training process holds beyond tensors (from the profile, per GPU)."""

    cuda_context_bytes: float = Field(ge=0, allow_inf_nan=False, description="CUDA context, cuBLAS/cuDNN workspaces")
    comm_workspace_bytes: float = Field(ge=0, allow_inf_nan=False, description="NCCL buffers and channels")
    allocator_fraction: float = Field(ge=0, lt=1, description="caching-allocator fragmentation, share of tensors")


class Plausibility(Frozen):
    """The best published MFU of this class of hardware (a ceiling for plausibility flags), with its source."""

    mfu_ceiling: dict[Precision, float] = Field(
        default_factory=dict, description="best published MFU, by the precision's own peak"
    )
    source: str = ""


class HardwareProfile(Frozen):
    """hardware_profiles/NAME.yaml: one GPU model in one node design.

    Two sizes: the node (`gpus_per_node`: GPUs per host or tray, what a launcher places and a node failure
    takes down) and the NVLink domain (`nvlink_domain`: GPUs that reach each other over the `intra_node` tier,
    NVLink / NVSwitch / Infinity Fabric). On HGX and OAM boards the two are the same 8 GPUs; a GB200 / GB300
    NVL72 rack is 18 trays of 4 GPUs on one NVLink switch fabric of 72 (cost/comm.py `group_link`)."""

    name: str
    description: str = ""
    gpu: GPUSpec
    gpus_per_node: int = Field(gt=0)
    nvlink_domain: int = Field(
        1,
        gt=0,
        description="GPUs one GPU reaches over the intra_node tier; a multiple of gpus_per_node "
        "(default: gpus_per_node)",
    )
    intra_node: LinkTier
    inter_node: LinkTier
    efficiency: Efficiency
    reserved: ReservedMemory
    checkpoint_write_bytes_per_s: float = Field(
        2e9, gt=0, allow_inf_nan=False, description="per-node write bandwidth to checkpoint storage"
    )
    plausibility: Plausibility = Plausibility()
    calibration_proxy: str | None = Field(
        None,
        description="a calibrated profile of the same GPU architecture whose engine factors and error bars "
        "this one borrows, widened, while it has none of its own (h200 -> h100-sxm)",
    )
    kernels_of: str | None = Field(
        None,
        description="the profile whose GPU this one's kernels are: the same die at the same clocks (an export "
        "variant with fewer links) or at a lower power limit (with_power_limit); its fitted engine entry applies",
    )
    aliases: tuple[str, ...] = Field((), description="other names the catalog finds this entry by (case-insensitive)")

    @model_validator(mode="before")
    @classmethod
    def _domain_default(cls, data: Any) -> Any:
        """An absent nvlink_domain is the node (every profile written before the field existed)."""
        if isinstance(data, dict) and data.get("nvlink_domain") is None:
            node = data.get("gpus_per_node")
            if isinstance(node, int) and not isinstance(node, bool):
                data = {**data, "nvlink_domain": node}
        return data

    @model_validator(mode="after")
    def _check_domain(self) -> HardwareProfile:
        if self.nvlink_domain % self.gpus_per_node:
            raise ValueError(
                f"nvlink_domain = {self.nvlink_domain} must be a multiple of gpus_per_node = {self.gpus_per_node} "
                "(whole nodes share one NVLink domain)"
            )
        return self

    @property
    def domains_held(self) -> int | None:
        """NVLink domains the machine holds, where a cluster bounds them (cluster/fabric.py ClusterHardware);
        None: as many as a job asks for."""
        return None

    @property
    def runs_on_cpu(self) -> bool:
        """A profile of CPU processes, not GPUs: the shipped cpu profile, or one `planner bench-hardware` wrote on a
        CPU (architecture cpu; an older one says so only in its device name, "x86_64 CPU (1 thread)")."""
        return self.gpu.architecture == "cpu" or "cpu" in self.gpu.name.lower().split()

    def supports(self, precision: str) -> bool:
        """Whether the GPU has tensor cores (or, for fp32, units) for this precision's GEMMs (a named recipe: for
        its format, fp8 or fp4; engine/recipes.py checks the architecture)."""
        return gemm_format(precision) in self.gpu.peak_flops

    def peak(self, precision: str) -> float:
        """The dense peak of this precision's GEMMs (a named recipe: of its format)."""
        return self.gpu.peak_flops[gemm_format(precision)]  # type: ignore[index]

    def with_gpus_per_node(self, gpus_per_node: int) -> HardwareProfile:
        """The profile on nodes of another size (a runs file may state its own). A domain that was the node
        follows it; a larger one (NVL72) stays, and must still hold whole nodes."""
        if gpus_per_node == self.gpus_per_node:
            return self
        domain = gpus_per_node if self.nvlink_domain == self.gpus_per_node else self.nvlink_domain
        if domain % gpus_per_node:
            raise PlannerError(
                f"gpus_per_node = {gpus_per_node} does not divide {self.name}'s NVLink domain of {domain} GPUs; "
                f"use a divisor of {domain}"
            )
        return self.model_copy(update={"gpus_per_node": gpus_per_node, "nvlink_domain": domain})

    def with_power_limit(self, watts: float) -> HardwareProfile:
        """The same GPU run under a lower board power limit: the compute peaks scale with the clock the cap
        sustains (`clock_fraction`); HBM, links and the efficiency block do not change. The profile's own limit
        returns it unchanged; one above it is refused, as nvidia-smi refuses it (a cap never raises a peak). The
        capped profile is named NAME-<watts>w, borrows NAME's calibration as a proxy, and its MFU counts against the
        capped peaks."""
        g = self.gpu
        if g.power_limit_w is None or g.idle_power_w is None:
            missing = [k for k, v in (("gpu.power_limit_w", g.power_limit_w), ("gpu.idle_power_w", g.idle_power_w))
                       if v is None]  # fmt: skip
            raise PlannerError(
                f"{self.name} cannot be capped at {watts:g} W: its profile states no {' or '.join(missing)}, the "
                "board limit and idle draw the clock under a cap is reckoned from; give a GPU whose profile states "
                f"both, or add them to a copy of {self.name}'s profile"
            )
        if watts == g.power_limit_w:
            return self
        floor = g.min_power_limit_w
        if not (math.isfinite(watts) and (floor or 0) <= watts < g.power_limit_w):  # nvidia-smi -pl refuses a limit
            raise PlannerError(  # outside [AllowableMin, max]; 100 W on an H100 was priced, 701 W ignored (audit)
                f"power limit {watts:g} W: {self.name} takes caps "
                + (f"from {floor:g} W (nvidia-smi AllowableMin) " if floor is not None else "")
                + f"up to its {g.power_limit_w:g} W limit"
            )
        if not (math.isfinite(watts) and watts > g.idle_power_w):
            raise PlannerError(
                f"power limit {watts:g} W: must be above {self.name}'s idle power of {g.idle_power_w:g} W "
                f"(and at most its {g.power_limit_w:g} W limit to change anything)"
            )
        f = clock_fraction(watts, limit_w=g.power_limit_w, idle_w=g.idle_power_w)
        gpu = g.model_copy(
            update={"peak_flops": {p: v * f for p, v in g.peak_flops.items()}, "power_limit_w": float(watts)}
        )
        return self.model_copy(
            update={
                "name": f"{self.name}-{watts:g}w",
                "description": f"{self.description} (capped at {watts:g} W: compute peaks x{f:.4f})".strip(),
                "gpu": gpu,
                "calibration_proxy": self.calibration_proxy or self.name,
                "kernels_of": self.kernels_of or self.name,
                "aliases": (),
            }
        )
