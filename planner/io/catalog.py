"""Loading model specs, hardware and engine profiles by catalog name or path (a YAML file, a Hugging Face
``config.json`` or its folder). Where the catalogs are is catalog_roots.py; how files are read, readers.py.

Pure loading (PyYAML, json, pydantic; no torch, no scipy). Every failure raises one `PlannerError` whose
single line names the file, the offending value and what would be valid. The declared-params check of
`ModelSpec` stays a Python warning (the CLI prints it).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from planner.engine import Engine
from planner.errors import PlannerError, did_you_mean
from planner.hardware import HardwareProfile
from planner.io.catalog_roots import (
    CATALOG_ENV,
    ENGINE_DIR,
    HARDWARE_DIR,
    MODEL_DIR,
    catalog_path,
    catalog_root,
    catalog_roots,
    list_engines,
    list_hardware,
    list_models,
    names,
    set_user_dirs,
    user_config_dir,
)
from planner.io.hf_config import hf_fields
from planner.io.hf_layout import keys_said
from planner.io.readers import describe_validation_error, display_path, load_json, load_yaml, validated
from planner.specs import ModelSpec

__all__ = [
    "CATALOG_ENV",
    "DEFAULT_ENGINE",
    "DEFAULT_HARDWARE",
    "catalog_path",
    "catalog_root",
    "catalog_roots",
    "describe_validation_error",
    "engine_source_path",
    "hardware_source_text",
    "list_engines",
    "list_hardware",
    "list_models",
    "load_engine",
    "load_hardware",
    "load_json",
    "load_model",
    "load_yaml",
    "model_from_hf_config",
    "set_user_catalogs",
    "user_config_dir",
]

DEFAULT_HARDWARE = "h100-sxm"  # what --hardware means when neither the flag nor a plan file names one
DEFAULT_ENGINE = "megatron"  # likewise for --engine: Megatron-Core, what NeMo and Megatron-Bridge run

YAML_SUFFIXES = (".yaml", ".yml")
POWER_CAPPED = re.compile(r"(.+)-(\d+(?:\.\d+)?)[wW]")  # NAME-<watts>w (load_hardware)
_Spec = TypeVar("_Spec", ModelSpec, HardwareProfile, Engine)


def set_user_catalogs(dirs: Sequence[str | Path]) -> None:
    """`--catalog DIR`: user catalogs searched first (catalog_roots.set_user_dirs); entries parsed before are
    forgotten."""
    set_user_dirs(dirs)
    _catalog.cache_clear()


# ---- name or path --------------------------------------------------------------------------------
def looks_like_path(arg: str) -> bool:
    """A model or hardware reference that names a file, not a catalog entry."""
    return "/" in arg or "\\" in arg or arg.endswith((*YAML_SUFFIXES, ".json")) or Path(arg).is_file()


def _unknown(kind: str, name: str, known: list[str], hint: str) -> PlannerError:
    guess = did_you_mean(name, known)
    return PlannerError(f'unknown {kind} "{name}"{guess}; known: {", ".join(known)} (or give a path to {hint})')


def _model_source(name_or_path: str | Path) -> tuple[Path | None, Path | None]:
    """(the catalog entry, the user's file or folder) a model reference names, at most one of them: a path-like
    reference is a path; a name is the catalog's, else a folder of that name here (a Hugging Face download); neither
    for an unknown name. The catalog is looked up once: a user's entry that shadows a shipped one is said once."""
    arg = str(name_or_path)
    if isinstance(name_or_path, Path) or looks_like_path(arg):
        return None, Path(arg)
    entry = catalog_path(MODEL_DIR, arg)
    return entry, (Path(arg) if entry is None and Path(arg).is_dir() else None)


def model_user_path(name_or_path: str | Path) -> Path | None:
    """The user's model file or folder load_model reads for a reference, None where it names a catalog entry (or
    nothing): what `launch --emit` copies next to a cluster script."""
    return _model_source(name_or_path)[1]


def load_model(name_or_path: str | Path | None) -> ModelSpec:
    """A model from the catalog (`gpt3-175b`), a model YAML, a Hugging Face `config.json` or its directory."""
    if name_or_path is None:  # a command without --model (search said 'unknown model "None"')
        raise PlannerError("no model given: pass --model NAME|PATH (see `planner models`)")
    arg = str(name_or_path)
    entry, path = _model_source(name_or_path)
    if entry is not None:
        return _catalog(ModelSpec, MODEL_DIR, entry)
    if path is not None:
        if path.is_dir():
            if not (path / "config.json").is_file():
                raise PlannerError(
                    f"{display_path(path)} is a folder without a config.json: give a model .yaml, or a Hugging Face "
                    "config.json or its folder"
                )
            path = path / "config.json"
        if path.suffix == ".json":
            return model_from_hf_config(path)
        return _model_from_yaml(path)
    return _catalog(ModelSpec, MODEL_DIR, _known("model", MODEL_DIR, arg, "a .yaml, a config.json or its folder"))


def load_hardware(name_or_path: str | Path) -> HardwareProfile:
    """A hardware profile from the catalog (`h100-sxm`) or a profile YAML; NAME-<W>w, where no profile has that
    name, is NAME under a W-watt power cap, the name HardwareProfile.with_power_limit gives it (`b200-600w`: what
    `--power-limit 600` prices and `search --save` writes)."""
    arg = str(name_or_path)
    if isinstance(name_or_path, Path) or looks_like_path(arg):
        return _hardware_from_yaml(Path(arg))
    entry = catalog_path(HARDWARE_DIR, arg)
    if entry is not None:  # looked up once: a user's entry that shadows a shipped one is said once
        return _catalog(HardwareProfile, HARDWARE_DIR, entry)
    capped = POWER_CAPPED.fullmatch(arg.strip())
    base = catalog_path(HARDWARE_DIR, capped[1]) if capped else None
    if capped and base is not None:
        hw = _catalog(HardwareProfile, HARDWARE_DIR, base)
        out = hw.with_power_limit(float(capped[2]))
        if out is hw:  # no cap: the name says one this profile does not take (no NAME-<W>w is written for it)
            raise PlannerError(
                f"hardware {arg!r}: {capped[2]} W is {hw.name}'s own limit, so it caps nothing; give {hw.name}, or "
                f"a cap below {hw.gpu.power_limit_w:g} W"
            )
        return out
    hint = "a hardware profile .yaml, or NAME-<watts>w for a profile under a power cap"
    return _catalog(HardwareProfile, HARDWARE_DIR, _known("hardware", HARDWARE_DIR, arg, hint))


def hardware_source_text(name_or_path: str) -> str | None:
    """The YAML text of a hardware profile (a catalog name or a path), for rewriting it in place."""
    path = Path(name_or_path) if looks_like_path(name_or_path) else catalog_path(HARDWARE_DIR, name_or_path)
    return path.read_text() if path is not None and path.is_file() else None


def engine_source_path(name: str) -> Path:
    """The catalog file of an engine profile."""
    return catalog_path(ENGINE_DIR, name) or catalog_root() / ENGINE_DIR / f"{name}.yaml"


def load_engine(name_or_path: str | Path) -> Engine:
    """An engine profile from the catalog (`megatron`) or an engine profile YAML."""
    arg = str(name_or_path)
    if isinstance(name_or_path, Path) or looks_like_path(arg):
        return _engine_from_yaml(Path(arg))
    return _catalog(Engine, ENGINE_DIR, _known("engine", ENGINE_DIR, arg, "an engine profile .yaml"))


def _known(kind: str, kind_dir: str, name: str, hint: str) -> Path:
    """The file of a catalog name or alias, or one line naming the known ones."""
    path = catalog_path(kind_dir, name)
    if path is None:
        raise _unknown(kind, name, names(kind_dir), hint)
    return path


def _engine_from_yaml(path: Path) -> Engine:
    return _from_yaml(Engine, path)


def _model_from_yaml(path: Path) -> ModelSpec:
    return _from_yaml(ModelSpec, path)


def _hardware_from_yaml(path: Path) -> HardwareProfile:
    return _from_yaml(HardwareProfile, path)


@cache
def _catalog(cls: type[_Spec], kind_dir: str, path: Path) -> _Spec:
    """A catalog entry, parsed once per process (the search asks for the same ones many times); the shipped
    files by libyaml, a user's by the pure-Python loader. Its `name` must be its file's: the catalog finds entries
    by file name, so a file named otherwise would list under one name and be found under another."""
    spec = _from_yaml(cls, path, shipped=path.parent.parent == catalog_root())
    if spec.name.lower() != path.stem.lower():
        raise PlannerError(
            f"{display_path(path)}: its name {spec.name!r} is not its file's, {path.stem!r} (a catalog entry is found "
            f"by its file name): rename the file {spec.name}.yaml, or drop its name line"
        )
    return spec


def _from_yaml(cls: type[_Spec], path: Path, *, shipped: bool = False) -> _Spec:
    """A spec from a YAML file whose `name` defaults to the file's stem."""
    data = load_yaml(path, shipped=shipped)
    if isinstance(data, dict):
        _refuse_other_kind(cls, data, display_path(path))
        data.setdefault("name", path.stem)
    result: _Spec = validated(cls, data, display_path(path))
    return result


_KINDS: dict[type[BaseModel], str] = {
    ModelSpec: "a model spec",
    HardwareProfile: "a hardware profile",
    Engine: "an engine profile",
}
_SHARED_FIELDS = {"name", "description", "aliases"}


def _refuse_other_kind(cls: type[_Spec], data: dict[Any, Any], source: str) -> None:
    """A file of another kind (a hardware profile given as a model, a config.json as hardware) said as such in one
    short line, not refused field by field (each unknown field with the valid ones: thousands of characters)."""
    keys = {str(k) for k in data} - _SHARED_FIELDS
    own = len(keys & set(cls.model_fields))
    if "model_type" in keys and own < len(keys) / 2:
        raise PlannerError(f"{source} looks like a Hugging Face config.json (model_type), not {_KINDS[cls]}")
    if {"model", "plan"} <= keys and isinstance(data.get("plan"), dict):  # what `search --save` writes
        raise PlannerError(f"{source} looks like a plan file (search --save), not {_KINDS[cls]}: --plan reads it")
    for other, kind in _KINDS.items():
        if other is not cls and len(keys & set(other.model_fields)) > max(own, len(keys) / 2):
            raise PlannerError(f"{source} looks like {kind}, not {_KINDS[cls]}")


# ---- Hugging Face config.json --------------------------------------------------------------------
def model_from_hf_config(path: str | Path) -> ModelSpec:
    """Map a Hugging Face `config.json` (local file) onto `ModelSpec`."""
    path = Path(path)
    source = display_path(path)
    cfg = load_json(path, source)
    if not isinstance(cfg, dict):
        raise PlannerError(f"{source}: expected a JSON object of config fields, got {type(cfg).__name__}")
    with warnings.catch_warnings(record=True) as caught:  # said once the model imports: never before an error
        warnings.simplefilter("always")
        try:
            spec = validated(ModelSpec, hf_fields(cfg, path, source), source)
        except PlannerError as e:  # the spec's fields it names, as the config's keys
            raise PlannerError(f"{e}{keys_said(str(e), cfg)}") from None
    for w in caught:
        warnings.warn(str(w.message), w.category, stacklevel=2)
    return spec
