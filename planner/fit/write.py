"""Writing what `planner calibrate` fitted: hardware profiles (only the fitted numbers of the efficiency block
change, each keeping its source comment and saying what it was) and the `fitted:` block of engine profiles.
Every file is written atomically (a temporary file, then a rename): a failed write leaves the old one.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import yaml

from planner.engine import Fitted
from planner.errors import PlannerError
from planner.fit.calibrate import FitResult
from planner.fit.priors import SCALES
from planner.hardware import HardwareProfile
from planner.io.files import names_folder, write_text_atomic

CALIBRATED_HEADER = "# Calibrated profile:"


def check_targets(option: str, paths: list[Path], *, engine: bool = False) -> None:
    """Each file calibrate would write is replaced only where it holds a profile of the kind written there (a
    hardware profile: `name` and `efficiency`; an engine profile: `name` and `rules`) or nothing; anything else is
    refused by name, before anything is written (`calibrate runs.yaml -o runs.yaml` replaced its own runs)."""
    from planner.io.files import check_ours

    what, keys = ("engine profile", {"name", "rules"}) if engine else ("hardware profile", {"name", "efficiency"})
    for path in paths:
        check_ours(path, option=option, what=what, ours=lambda doc: isinstance(doc, dict) and keys <= set(doc))


def _atomic(target: Path, text: str) -> None:
    write_text_atomic(target, text, what="profile")


def _num(v: float) -> str:
    return f"{v:.4g}" if 1e-3 <= abs(v) < 1e4 or v == 0 else f"{v:.4e}"


def _efficiency_lines(lines: list[str], values: dict[str, float], fitted_note: str) -> list[str]:
    """The efficiency block with the fitted values substituted line by line (comments kept)."""
    start = next((i for i, line in enumerate(lines) if line.startswith("efficiency:")), None)
    if start is None:
        raise PlannerError("the profile has no efficiency: block to calibrate")
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:1].isalpha()), len(lines))
    out = lines[: start + 1]
    table = None
    seen_fitted = False
    for line in lines[start + 1 : end]:
        key = line.strip().split(":", 1)[0]
        indent = len(line) - len(line.lstrip())
        if indent == 2:
            table = key
        new = line
        if indent == 2 and key in values and key not in SCALES:
            new = _replace_scalar(line, key, values[key])
        elif table in ("matmul", "matmul_fp8") and "matmul_scale" in values and "efficiency:" in line:
            new = _scale_inline(line, ("efficiency",), values["matmul_scale"])
        elif table == "attention" and "attention_scale" in values and "forward:" in line:
            new = _scale_inline(line, ("forward", "backward"), values["attention_scale"])
        if indent == 2 and key == "fitted":
            new, seen_fitted = (
                f"  fitted: {yaml.safe_dump(fitted_note, width=10**6).strip()}  # provenance of the fitted values",
                True,
            )
        out.append(new)
    if not seen_fitted:
        out.append(f"  fitted: {yaml.safe_dump(fitted_note, width=10**6).strip()}  # provenance of the fitted values")
    return out + lines[end:]


def _replace_scalar(line: str, key: str, value: float) -> str:
    code, _, comment = line.partition("#")
    old = code.split(":", 1)[1].strip()
    if old and _close(float(old), value):
        return line
    note = f"calibrated (was {old})"
    return f"  {key}: {_num(value)}  # {note}" + (f"; {comment.strip()}" if comment else "")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def _scale_inline(line: str, fields: tuple[str, ...], scale: float) -> str:
    if _close(scale, 1.0):
        return line
    code, sep, comment = line.partition("#")
    for f in fields:
        code = re.sub(
            rf"({f}:\s*)([0-9.eE+-]+)", lambda m: f"{m.group(1)}{min(0.98, float(m.group(2)) * scale):.4f}", code
        )
    return f"{code.rstrip()}  # x{scale:.3f} calibrated" + (f"; {comment.strip()}" if sep else "")


def write_hardware_profile(result: FitResult, hardware: str, source_text: str | None, out: Path) -> None:
    """The fitted profile of one hardware: the source profile's text with its fitted numbers replaced, or a
    dump of the profile when there is no text; named after the output file."""
    today = date.today().isoformat()
    n = sum(o.hardware.name == hardware for o in result.observations)
    note = (
        f"planner calibrate {today}: {n} runs ({', '.join(result.names)}); median |step error| "
        f"{result.median_before_pct:.1f}% -> {result.median_after_pct:.1f}% over all fitted runs"
    )
    values = result.hardware_values.get(hardware, {})
    name = out.stem
    if source_text:
        lines = [line for line in source_text.splitlines() if not line.startswith(CALIBRATED_HEADER)]
        lines = _efficiency_lines(lines, values, note)
        lines = [f"name: {name}" if line.startswith("name:") else line for line in lines]
        text = "\n".join(lines) + "\n"
    else:
        doc = result.fitted[hardware].model_dump(mode="json")
        doc["name"] = name
        doc["efficiency"]["fitted"] = note
        text = yaml.safe_dump(doc, sort_keys=False)
    header = f"{CALIBRATED_HEADER} fitted by planner calibrate on {today} from {result.bases[hardware].name}.\n"
    _atomic(out, header + text)


def fitted_block(fitted: dict[str, Fitted]) -> str:
    lines = ["fitted:                                    # by planner calibrate: per hardware profile, with provenance"]
    for hw, f in sorted(fitted.items()):
        doc = {k: v for k, v in f.model_dump().items() if v is not None}
        lines.append(f"  {hw}: {yaml.safe_dump(doc, default_flow_style=True, width=10**6).strip()}")
    return "\n".join(lines) + "\n"


def write_engine_fitted(engine_path: Path, out: Path, fitted: dict[str, Fitted]) -> None:
    """The engine profile at `engine_path` with `fitted` merged into its `fitted:` block (other hardware kept),
    written to `out` (the same path to update it in place)."""
    from planner.io.catalog import load_yaml

    text = engine_path.read_text()
    doc = load_yaml(engine_path) or {}
    merged = {k: Fitted(**v) for k, v in (doc.get("fitted") or {}).items()}
    merged.update(fitted)
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("fitted:")), None)
    if start is not None:
        end = next((i for i in range(start + 1, len(lines)) if lines[i][:1].isalpha()), len(lines))
        lines = lines[:start] + fitted_block(merged).splitlines() + lines[end:]
    else:
        lines += fitted_block(merged).splitlines()
    _atomic(out, "\n".join(lines).rstrip("\n") + "\n")


def output_is_file(out: str) -> bool:
    """Whether -o names one profile's file (.yaml/.yml, any case) rather than a folder for several; a path that is
    neither (an existing file of another kind, a .json, a new name with another suffix) is refused: the profiles
    are YAML."""
    path = Path(out)
    if path.suffix.lower() in (".yaml", ".yml"):
        return True
    if path.is_file() or path.suffix.lower() == ".json":
        raise PlannerError(f"-o {out}: give a .yaml file for one profile, or a folder for several (YAML)")
    if names_folder(out) or path.is_dir() or not path.suffix[1:].isalpha():  # out.d/, fits.v2, calib.2026-11
        return False
    raise PlannerError(  # c5.txt: a file's name meant, not a folder to make
        f"-o {out}: give a .yaml file for one profile, or a folder for several (an existing one, or a new name "
        f"ending in /: {out}/)"
    )


def hardware_output(out: str, hardware: list[HardwareProfile]) -> dict[str, Path]:
    """Where each fitted profile goes: `out` itself for one profile (a .yaml file), out/NAME.yaml for several."""
    path = Path(out)
    if output_is_file(out) and len(hardware) == 1:
        return {hardware[0].name: path}
    if output_is_file(out):
        raise PlannerError(f"-o {out}: with {len(hardware)} --hardware profiles, give a directory")
    return {h.name: path / f"{h.name}.yaml" for h in hardware}


def write_engine_outputs(result: FitResult, out_dir: Path, names: dict[str, str]) -> list[Path]:
    """Every engine with runs in the fit, with its groups' factors merged into its fitted block (keyed by the
    calibrated profile's name); engines without runs are left as they are (they keep their pooled behaviour)."""
    from planner.io.catalog import engine_source_path

    written = []
    for e, by_hw in sorted(result.engines.items()):
        source = engine_source_path(e)
        if not source.is_file():
            continue
        target = out_dir / f"{e}.yaml"
        write_engine_fitted(source, target, {names.get(h, h): f for h, f in by_hw.items()})
        written.append(target)
    return written


def using_written(hardware_files: list[str], engine_files: list[str]) -> str:
    """How the profiles calibrate wrote are priced with, in one line ('' with none written): by path, as the loose
    files they are (a --catalog folder holds them in hardware_profiles/ and engine_profiles/)."""
    if not hardware_files and not engine_files:
        return ""
    given = [f"--hardware {hardware_files[0]}"] if hardware_files else []
    given += [f"--engine {engine_files[0]}"] if engine_files else []
    folders = {str(Path(f).parent) for f in [*hardware_files, *engine_files]}
    return (
        f"price with them by path: estimate or search {' '.join(given)}; compare with the shipped ones: validate RUNS "
        f"--calibrated {sorted(folders)[0]}"
    )
