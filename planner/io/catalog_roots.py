"""Where the catalogs are: the shipped model_specs/, hardware_profiles/ and engine_profiles/, and the user's own
(--catalog DIR, PLANNER_CATALOG_PATH, the user config folder), searched in that order; names are found
case-insensitively and by their aliases (`H100` -> h100-sxm). Built from file names only: nothing is parsed."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from planner.errors import PlannerError
from planner.io.files import read_text

MODEL_DIR = "model_specs"
HARDWARE_DIR = "hardware_profiles"
ENGINE_DIR = "engine_profiles"
CATALOG_DIRS = (MODEL_DIR, HARDWARE_DIR, ENGINE_DIR)


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


def set_user_dirs(dirs: Sequence[str | Path]) -> None:
    """The folders `--catalog DIR` names: searched before PLANNER_CATALOG_PATH, the user config folder and the
    shipped catalogs. Each holds model_specs/, hardware_profiles/ and engine_profiles/ (any may be missing)."""
    for d in dirs:
        if not Path(d).is_dir():
            raise PlannerError(f"--catalog {str(d)!r} is not a directory (it should hold model_specs/, ...)")
        _check_layout(Path(d))
    _user_dirs[:] = [Path(d) for d in dirs]
    _index.cache_clear()
    _aliases.cache_clear()
    _alias_claims.cache_clear()
    _alias_owners.cache_clear()


def _check_layout(folder: Path) -> None:
    """A --catalog folder of loose profiles (what calibrate -o / --engine-out write) and none of the catalog's
    folders would be searched for nothing, and the shipped profiles priced instead, unsaid (audit): refused."""
    if any((folder / sub).is_dir() for sub in CATALOG_DIRS):
        return
    loose = sorted(f.name for f in folder.glob("*.y*ml"))
    if loose:
        raise PlannerError(
            f"--catalog {str(folder)!r} holds {', '.join(loose[:3])}{' ...' if len(loose) > 3 else ''} but none of "
            f"{', '.join(d + '/' for d in CATALOG_DIRS)}: move each file into the folder of its kind, or give it by "
            f"path (--hardware {folder / loose[0]}, --engine, --model)"
        )


def user_config_dir() -> Path:
    """$XDG_CONFIG_HOME/planner, else ~/.config/planner."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "planner"


def catalog_roots() -> list[Path]:
    """Every catalog root in search order: --catalog, PLANNER_CATALOG_PATH, the user config folder, shipped."""
    env = [Path(p) for p in os.environ.get(CATALOG_ENV, "").split(os.pathsep) if p.strip()]
    for d in env:  # as --catalog: a folder named and not there is a mistake to say, not one to skip
        if not d.is_dir():
            raise PlannerError(
                f"{CATALOG_ENV} names {str(d)!r}, which is not a directory (it should hold model_specs/, ...)"
            )
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


_ALIASES = re.compile(r"^aliases:\s*\[([^\]]*)\]", re.M)  # the one-line list the shipped catalogs write
_BLOCK_ALIASES = re.compile(r"^aliases:[ \t]*\n((?:[ \t]*-[^\n]*\n?)+)", re.M)  # the block list `models show` writes


@cache
def _alias_claims(kind_dir: str) -> dict[str, tuple[str, ...]]:
    """alias (lower case) -> the catalog names whose files list it in `aliases: [...]` or as a block list (read as
    text: no parse), shipped entries first."""
    out: dict[str, list[str]] = {}
    for key, entry in _index(kind_dir).items():
        for alias in _listed_aliases(read_text(entry.path)):
            out.setdefault(alias, []).append(key)
    return {alias: tuple(keys) for alias, keys in out.items()}


@cache
def _alias_owners(kind_dir: str) -> dict[str, str]:
    """alias (lower case) -> the first catalog name that lists it (_alias_claims)."""
    return {alias: keys[0] for alias, keys in _alias_claims(kind_dir).items()}


def _listed_aliases(text: str) -> list[str]:
    """The aliases a catalog file lists, one-line or block (a copy `planner models show` wrote, renamed, was found
    by its name but never by its block-listed aliases)."""
    if found := _ALIASES.search(text):
        items = found.group(1).split(",")
    elif found := _BLOCK_ALIASES.search(text):
        items = [line.split(" #")[0].strip()[1:] for line in found.group(1).splitlines()]
    else:
        items = []
    return [a for a in (item.strip().strip("'\"").lower() for item in items) if a]


@cache
def _aliases(kind_dir: str) -> dict[str, str]:
    """The aliases a name looks up: those no entry has as its own name."""
    return {a: key for a, key in _alias_owners(kind_dir).items() if a not in _index(kind_dir)}


def lookup(kind_dir: str, name: str) -> Entry | None:
    """A catalog entry by name, case-insensitively, or by one of its aliases (`H100` -> h100-sxm). A user's entry
    that shadows a shipped one, by its name or by a shipped entry's alias, is said."""
    index, key = _index(kind_dir), name.strip().lower()
    hit = index.get(key) or index.get(_aliases(kind_dir).get(key, ""))
    if hit is not None and hit.shadows is not None:
        warnings.warn(f"{hit.name}: {hit.path} shadows the shipped {hit.shadows}", stacklevel=3)
    owner, shipped = _alias_owners(kind_dir).get(key), catalog_root()
    mine = hit is not None and hit.path.parent.parent != shipped
    if hit is not None and mine and owner and owner != key and index[owner].path.parent.parent == shipped:
        warnings.warn(f"{hit.name}: {hit.path} takes {key!r}, an alias of the shipped {owner}", stacklevel=3)
    passed = [index[k].path for k in _alias_claims(kind_dir).get(key, ()) if hit is None or k != hit.name.lower()]
    if hit is not None and (passed := [p for p in passed if p.parent.parent != shipped]):
        listed = ", ".join(map(str, passed))  # a user's alias that a name, or an earlier entry's alias, takes
        warnings.warn(f"{key!r} is {hit.name} ({hit.path}); the alias {key!r} that {listed} lists is not used",
                      stacklevel=3)  # fmt: skip
    return hit


def names(kind_dir: str) -> list[str]:
    return sorted(e.name for e in _index(kind_dir).values())


def list_models() -> list[str]:
    return names(MODEL_DIR)


def list_hardware() -> list[str]:
    return names(HARDWARE_DIR)


def list_engines() -> list[str]:
    return names(ENGINE_DIR)


def catalog_path(kind_dir: str, name: str) -> Path | None:
    """The file a catalog name (or alias) resolves to."""
    hit = lookup(kind_dir, name)
    return hit.path if hit else None
