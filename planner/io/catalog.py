"""Loading model specs and hardware profiles: catalog names, YAML files and Hugging Face ``config.json``.

Pure loading (PyYAML, json, pydantic; no torch, no scipy). Every failure raises one `PlannerError` whose
single line names the file, the offending value and what would be valid. The declared-params check of
`ModelSpec` stays a Python warning (the CLI prints it).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar, get_args

import yaml
from pydantic import BaseModel, ValidationError

from planner.engine import Engine
from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.io.files import read_text
from planner.io.hf_config import hf_fields
from planner.specs import ModelSpec

DEFAULT_HARDWARE = "h100-sxm"  # what --hardware means when neither the flag nor a plan file names one
DEFAULT_ENGINE = "megatron"  # likewise for --engine: Megatron-Core, what NeMo and Megatron-Bridge run
MODEL_DIR = "model_specs"
HARDWARE_DIR = "hardware_profiles"
ENGINE_DIR = "engine_profiles"

YAML_SUFFIXES = (".yaml", ".yml")
_Spec = TypeVar("_Spec", ModelSpec, HardwareProfile, Engine)


def catalog_root() -> Path:
    """The directory holding the shipped model_specs/, hardware_profiles/ and engine_profiles/: the top of a
    source checkout (also under an editable install), or planner/catalog/ in an installed wheel (setup.py)."""
    package = Path(__file__).resolve().parents[1]
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / HARDWARE_DIR).is_dir():
        return checkout
    return package / "catalog"


# ---- where catalogs are found ----------------------------------------------------------------------
CATALOG_ENV = "PLANNER_CATALOG_PATH"  # user catalog folders, separated like PATH
_user_dirs: list[Path] = []  # --catalog DIR, in the order given


def set_user_catalogs(dirs: Sequence[str | Path]) -> None:
    """The folders `--catalog DIR` names: searched before PLANNER_CATALOG_PATH, the user config folder and the
    shipped catalogs. Each holds model_specs/, hardware_profiles/ and engine_profiles/ (any may be missing)."""
    for d in dirs:
        if not Path(d).is_dir():
            raise PlannerError(f"--catalog {str(d)!r} is not a directory (it should hold model_specs/, ...)")
    _user_dirs[:] = [Path(d) for d in dirs]
    _index.cache_clear()
    _catalog.cache_clear()


def user_config_dir() -> Path:
    """$XDG_CONFIG_HOME/planner, else ~/.config/planner."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "planner"


def catalog_roots() -> list[Path]:
    """Every catalog root in search order: --catalog, PLANNER_CATALOG_PATH, the user config folder, shipped."""
    env = [Path(p) for p in os.environ.get(CATALOG_ENV, "").split(os.pathsep) if p.strip()]
    return [*_user_dirs, *env, user_config_dir(), catalog_root()]


@dataclass(frozen=True)
class Entry:
    """One catalog entry: its file, and the shipped file it shadows (None: it is the shipped one, or new)."""

    name: str
    path: Path
    shadows: Path | None = None


@cache
def _index(kind_dir: str) -> dict[str, Entry]:
    """Name (lower case) -> the entry the first root that has it gives; later roots' files of the same name are
    shadowed. Built from file names only (no file is parsed)."""
    out: dict[str, Entry] = {}
    shipped = catalog_root()
    for root in reversed(catalog_roots()):  # shipped first, each earlier root overrides
        folder = root / kind_dir
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.yaml")):
            key = path.stem.lower()
            prev = out.get(key)
            shadows = prev.path if (prev and prev.path.parent.parent == shipped) else (prev.shadows if prev else None)
            out[key] = Entry(path.stem, path, shadows if root != shipped else None)
    return out


_ALIASES = re.compile(r"^aliases:\s*\[([^\]]*)\]", re.M)


@cache
def _aliases(kind_dir: str) -> dict[str, str]:
    """alias (lower case) -> catalog name, from each file's one-line `aliases: [...]` (read as text: no parse)."""
    out: dict[str, str] = {}
    for key, entry in _index(kind_dir).items():
        found = _ALIASES.search(read_text(entry.path))
        for alias in found.group(1).split(",") if found else ():
            alias = alias.strip().strip("'\"").lower()
            if alias and alias not in _index(kind_dir):
                out.setdefault(alias, key)
    return out


def _lookup(kind_dir: str, name: str) -> Entry | None:
    """A catalog entry by name, case-insensitively, or by one of its aliases (`H100` -> h100-sxm)."""
    index, key = _index(kind_dir), name.strip().lower()
    hit = index.get(key) or index.get(_aliases(kind_dir).get(key, ""))
    if hit is not None and hit.shadows is not None:
        warnings.warn(f"{hit.name}: {hit.path} shadows the shipped {hit.shadows}", stacklevel=3)
    return hit


def _names(kind_dir: str) -> list[str]:
    return sorted(e.name for e in _index(kind_dir).values())


def list_models() -> list[str]:
    return _names(MODEL_DIR)


def list_hardware() -> list[str]:
    return _names(HARDWARE_DIR)


def list_engines() -> list[str]:
    return _names(ENGINE_DIR)


def catalog_path(kind_dir: str, name: str) -> Path | None:
    """The file a catalog name (or alias) resolves to."""
    hit = _lookup(kind_dir, name)
    return hit.path if hit else None


# ---- YAML ----------------------------------------------------------------------------------------
class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads `80.0e9` and `1e9` as floats.

    PyYAML follows YAML 1.1, where a float needs a dot and a signed exponent, so `80.0e9` would be a string.
    """


_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
for _first in list("-+0123456789."):
    _Loader.yaml_implicit_resolvers[_first] = [
        (tag, rx) for tag, rx in _Loader.yaml_implicit_resolvers.get(_first, []) if tag != "tag:yaml.org,2002:float"
    ]
    _Loader.yaml_implicit_resolvers[_first].append(("tag:yaml.org,2002:float", _FLOAT))


class _FastLoader(getattr(yaml, "CSafeLoader", _Loader)):  # type: ignore[misc]
    """_Loader's rules on libyaml's C parser (about ten times faster), for the shipped catalog files only: the C
    parser recurses without Python's recursion limit, so a user's file nested thousands deep could crash it."""

    yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers


MAX_YAML_BYTES = 64 << 20  # no catalog, plan or runs file comes near this


def load_yaml(path: str | Path, *, shipped: bool = False) -> Any:
    """Parse a YAML file (SI numbers like `80.0e9` as floats); errors become one-line `PlannerError`s.
    `shipped`: one of the package's own catalog files, which may be parsed by libyaml."""
    path = Path(path)
    text = _read_text(path)
    if len(text) > MAX_YAML_BYTES:
        raise PlannerError(f"{_display(path)}: {len(text)} bytes is too large for a YAML input (max {MAX_YAML_BYTES})")
    try:
        return yaml.load(text, Loader=_FastLoader if shipped else _Loader)
    except RecursionError:
        raise PlannerError(f"{_display(path)}: YAML nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{_display(path)}:{mark.line + 1}:{mark.column + 1}" if mark else _display(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PlannerError(f"{where}: YAML syntax error: {problem}") from None


def load_json(path: str | Path, display: str | None = None) -> Any:
    """Parse a JSON file; errors become one-line `PlannerError`s naming `display` (default: the path)."""
    path = Path(path)
    source = display or _display(path)
    try:
        return json.loads(read_text(path, display=source))
    except RecursionError:
        raise PlannerError(f"{source}: JSON nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise PlannerError(f"{source}:{exc.lineno}:{exc.colno}: malformed JSON: {exc.msg}") from None


def _read_text(path: Path) -> str:
    return read_text(path, display=_display(path))


def _display(path: Path) -> str:
    """A short form of a path for messages: relative to the catalog root or the working directory."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return str(path)
    for base in (catalog_root(), Path.cwd()):
        try:
            return str(resolved.relative_to(base))
        except ValueError:
            continue
    return str(path)


# ---- pydantic errors as one line ----------------------------------------------------------------
def _model_classes(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [cls for arg in get_args(annotation) for cls in _model_classes(arg)]


def _fields_at(root: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Valid field names of the pydantic model that `loc` (an error location, minus its last part) points into."""
    cls: type[BaseModel] | None = root
    for part in loc:
        if cls is None or isinstance(part, int) or part not in cls.model_fields:
            continue
        found = _model_classes(cls.model_fields[part].annotation)
        cls = found[0] if found else None
    return list(cls.model_fields) if cls is not None else []


def describe_validation_error(exc: ValidationError, root: type[BaseModel]) -> str:
    """`field.path: message; other: message` with the valid field names for an unknown key."""
    parts = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        where = ".".join(str(p) for p in loc)
        if err["type"] == "extra_forbidden":
            msg = f"unknown field (valid fields: {', '.join(_fields_at(root, loc[:-1]))})"
        elif err["type"] == "missing":
            msg = "missing (required)"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] not in ("value_error", "assertion_error") and "input" in err:
                msg += f", got {err['input']!r}"
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts)


def _validate(cls: type[BaseModel], data: Any, source: str) -> Any:
    if not isinstance(data, dict):
        raise PlannerError(f"{source}: expected a mapping of {cls.__name__} fields, got {type(data).__name__}")
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise PlannerError(f"{source}: {describe_validation_error(exc, cls)}") from None


# ---- name or path --------------------------------------------------------------------------------
def _looks_like_path(arg: str) -> bool:
    return "/" in arg or "\\" in arg or arg.endswith((*YAML_SUFFIXES, ".json")) or Path(arg).is_file()


def _unknown(kind: str, name: str, known: list[str], hint: str) -> PlannerError:
    low = name.lower()
    close = [k for k in known if k.lower().startswith(low)] or difflib.get_close_matches(low, known, n=1, cutoff=0.7)
    guess = f' (did you mean "{close[0]}"?)' if close else ""
    return PlannerError(f'unknown {kind} "{name}"{guess}; known: {", ".join(known)} (or give a path to {hint})')


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A model from the catalog (`gpt3-175b`), a model YAML, a Hugging Face `config.json` or its directory."""
    arg = str(name_or_path)
    if isinstance(name_or_path, Path) or _looks_like_path(arg):
        path = Path(arg)
        if path.is_dir() and (path / "config.json").is_file():
            path = path / "config.json"
        if path.suffix == ".json":
            return model_from_hf_config(path)
        return _model_from_yaml(path)
    return _catalog(ModelSpec, MODEL_DIR, _known("model", MODEL_DIR, arg, "a .yaml or config.json"))


def load_hardware(name_or_path: str | Path) -> HardwareProfile:
    """A hardware profile from the catalog (`h100-sxm`) or a profile YAML."""
    arg = str(name_or_path)
    if isinstance(name_or_path, Path) or _looks_like_path(arg):
        return _hardware_from_yaml(Path(arg))
    return _catalog(HardwareProfile, HARDWARE_DIR, _known("hardware", HARDWARE_DIR, arg, "a hardware profile .yaml"))


def hardware_source_text(name_or_path: str) -> str | None:
    """The YAML text of a hardware profile (a catalog name or a path), for rewriting it in place."""
    path = Path(name_or_path) if _looks_like_path(name_or_path) else catalog_path(HARDWARE_DIR, name_or_path)
    return path.read_text() if path is not None and path.is_file() else None


def engine_source_path(name: str) -> Path:
    """The catalog file of an engine profile."""
    return catalog_path(ENGINE_DIR, name) or catalog_root() / ENGINE_DIR / f"{name}.yaml"


def load_engine(name_or_path: str | Path) -> Engine:
    """An engine profile from the catalog (`megatron`) or an engine profile YAML."""
    arg = str(name_or_path)
    if isinstance(name_or_path, Path) or _looks_like_path(arg):
        return _engine_from_yaml(Path(arg))
    return _catalog(Engine, ENGINE_DIR, _known("engine", ENGINE_DIR, arg, "an engine profile .yaml"))


def _known(kind: str, kind_dir: str, name: str, hint: str) -> Path:
    """The file of a catalog name or alias, or one line naming the known ones."""
    path = catalog_path(kind_dir, name)
    if path is None:
        raise _unknown(kind, name, _names(kind_dir), hint)
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
    files by libyaml, a user's by the pure-Python loader."""
    return _from_yaml(cls, path, shipped=path.parent.parent == catalog_root())


def _from_yaml(cls: type[_Spec], path: Path, *, shipped: bool = False) -> _Spec:
    """A spec from a YAML file whose `name` defaults to the file's stem."""
    data = load_yaml(path, shipped=shipped)
    if isinstance(data, dict):
        data.setdefault("name", path.stem)
    result: _Spec = _validate(cls, data, _display(path))
    return result


# ---- Hugging Face config.json --------------------------------------------------------------------
def model_from_hf_config(path: str | Path) -> ModelSpec:
    """Map a Hugging Face `config.json` (local file) onto `ModelSpec`."""
    path = Path(path)
    source = _display(path)
    cfg = load_json(path, source)
    if not isinstance(cfg, dict):
        raise PlannerError(f"{source}: expected a JSON object of config fields, got {type(cfg).__name__}")
    return _validate(ModelSpec, hf_fields(cfg, path, source), source)
