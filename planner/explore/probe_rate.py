"""What an advice probe found at one (GPU count, batch): the best plan's tokens/s per GPU, with where it was found and
what its plan is flagged with, so that advice measured against it can say so (a reference from a count whose plan
is above the best published MFU, or may not fit, was said as plain fact: audit)."""

from __future__ import annotations


class Rate(float):
    """Tokens/s per GPU (a float, as the probes compare them), with the count it was found at and a caveat ('' where
    its plan is flagged with nothing). It crosses a forked probe's pickle as floats do, its attributes with it."""

    gpus: int
    caveat: str

    def __new__(cls, value: float, gpus: int = 0, caveat: str = "") -> Rate:
        out = super().__new__(cls, value)
        out.gpus, out.caveat = gpus, caveat
        return out


def caveat_of(rate: float) -> str:
    """', found on N GPUs, whose plan CAVEAT' for a flagged Rate; '' otherwise."""
    if isinstance(rate, Rate) and rate.caveat:
        return f", found on {rate.gpus} GPUs, whose plan {rate.caveat}"
    return ""
