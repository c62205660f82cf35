"""Reading what users and the catalogs write: YAML (SI numbers like `80.0e9` as floats; the shipped catalogs by
libyaml) and JSON files, and pydantic validation errors as one line naming the file, the field and what would
be valid. Pure (PyYAML, json, pydantic); every failure is one `PlannerError`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from planner.errors import PlannerError
from planner.io.catalog_roots import catalog_root
from planner.io.files import read_text


# ---- YAML ----------------------------------------------------------------------------------------
def yaml_kind(value: object) -> str:
    """What a YAML value is, in a file's words (for 'expected a mapping, got ...')."""
    kinds = {dict: "a mapping", list: "a list", str: "text", type(None): "an empty item", bool: "true/false"}
    return kinds.get(type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads `80.0e9` and `1e9` as floats, and refuses a key given twice in one mapping.

    PyYAML follows YAML 1.1, where a float needs a dot and a signed exponent, so `80.0e9` would be a string; and it
    keeps the last of two equal keys without a word (YAML 1.2 says keys are unique), which hides a typo'd edit.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen and key != "<<":
                mark = key_node.start_mark
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} given twice in one mapping", mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


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
# Flow-style nesting ([ and {) a user's YAML may have: the deepest shipped catalog or runs file nests 1. PyYAML recurses
# per level and takes seconds to reach Python's recursion limit on a 5,000-deep document; refused before parsing.
MAX_YAML_FLOW_DEPTH = 100


def load_yaml(path: str | Path, *, shipped: bool = False) -> Any:
    """Parse a YAML file (SI numbers like `80.0e9` as floats); errors become one-line `PlannerError`s.
    `shipped`: one of the package's own catalog files, which may be parsed by libyaml."""
    path = Path(path)
    text = _read_text(path)
    if len(text) > MAX_YAML_BYTES:
        where = display_path(path)
        raise PlannerError(f"{where}: {len(text)} bytes is too large for a YAML input (max {MAX_YAML_BYTES})")
    kind = "JSON" if path.suffix.lower() == ".json" else "YAML"
    if not shipped and _flow_depth(text) > MAX_YAML_FLOW_DEPTH:
        raise PlannerError(f"{display_path(path)}: {kind} nested too deeply (more than {MAX_YAML_FLOW_DEPTH} levels)")
    if kind == "JSON":  # read as JSON: a tab or a trailing comma is what JSON says it is, not YAML
        return _json_document(text, display_path(path))
    try:
        return yaml.load(text, Loader=_FastLoader if shipped else _Loader)
    except RecursionError:
        raise PlannerError(f"{display_path(path)}: YAML nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{display_path(path)}:{mark.line + 1}:{mark.column + 1}" if mark else display_path(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PlannerError(f"{where}: YAML syntax error: {problem}") from None


def _json_document(text: str, where: str) -> Any:
    """A JSON document where a YAML one is read (a plan, runs or profile file named .json), a key given twice in one
    object refused as the YAML loader refuses it."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(set(keys)) < len(keys):
            twice = next(k for k in keys if keys.count(k) > 1)
            raise PlannerError(f"{where}: key {twice!r} is given twice in one object")
        return dict(pairs)

    return _decoded(text, where, "JSON syntax error", unique)


def _decoded(text: str, where: str, problem: str, pairs: Any = None) -> Any:
    """json.loads with its errors as one-line PlannerErrors naming `where`, the decode error said as `problem`."""
    try:
        return json.loads(text, object_pairs_hook=pairs)
    except RecursionError:
        raise PlannerError(f"{where}: JSON nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise PlannerError(f"{where}:{exc.lineno}:{exc.colno}: {problem}: {exc.msg}") from None


def _flow_depth(text: str) -> int:
    """The deepest nesting of YAML flow collections ([ ] and { }), brackets in strings counted alike (an upper
    bound, which is all the guard needs); cheap when the text has few brackets."""
    if text.count("[") + text.count("{") <= MAX_YAML_FLOW_DEPTH:
        return 0
    depth = deepest = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return deepest


def load_json(path: str | Path, display: str | None = None) -> Any:
    """Parse a JSON file; errors become one-line `PlannerError`s naming `display` (default: the path)."""
    path = Path(path)
    source = display or display_path(path)
    return _decoded(read_text(path, display=source, max_bytes=MAX_YAML_BYTES), source, "malformed JSON")


def _read_text(path: Path) -> str:
    return read_text(path, display=display_path(path), max_bytes=MAX_YAML_BYTES)


def display_path(path: Path) -> str:
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


MAX_UNKNOWN_NAMED = 3  # unknown fields named in a message; the rest counted


def describe_validation_error(exc: ValidationError, root: type[BaseModel]) -> str:
    """`field.path: message; other: message`, the unknown keys of one mapping said once, with its valid field
    names (a file of another kind has dozens: each with the list made one line of thousands of characters)."""
    errors = exc.errors()
    unknown: dict[tuple[Any, ...], list[str]] = {}  # a mapping's location -> its unknown keys, in order
    for err in errors:
        if err["type"] == "extra_forbidden":
            loc = tuple(err["loc"])
            unknown.setdefault(loc[:-1], []).append(".".join(str(p) for p in loc))
    parts = []
    for err in errors:
        loc = tuple(err["loc"])  # a list too short only because its items failed says nothing more (its dump: audit)
        if err["type"] == "too_short" and any(tuple(e["loc"][: len(loc)]) == loc != tuple(e["loc"]) for e in errors):
            continue
        if err["type"] != "extra_forbidden":
            parts.append(_describe(err))
        elif (keys := unknown.pop(tuple(err["loc"])[:-1], None)) is not None:  # at the first of them
            parts.append(_unknown_fields(keys, _fields_at(root, tuple(err["loc"])[:-1])))
    return "; ".join(parts)


def _describe(err: Any) -> str:
    where = ".".join(str(p) for p in err["loc"])
    if err["type"] == "missing":
        msg = "missing (required)"
    else:
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] not in ("value_error", "assertion_error") and "input" in err:
            msg += f", got {err['input']!r}"
    return f"{where}: {msg}" if where else msg


def _unknown_fields(keys: list[str], valid: list[str]) -> str:
    if len(keys) == 1:
        return f"{keys[0]}: unknown field (valid fields: {', '.join(valid)})"
    named = ", ".join(keys[:MAX_UNKNOWN_NAMED])
    more = f" and {len(keys) - MAX_UNKNOWN_NAMED} more" if len(keys) > MAX_UNKNOWN_NAMED else ""
    return f"{named}{more}: unknown fields (valid fields: {', '.join(valid)})"


def validated(cls: type[BaseModel], data: Any, source: str) -> Any:
    """`data` as a `cls`, or one line naming `source`, the fields and what would be valid."""
    if not isinstance(data, dict):
        raise PlannerError(f"{source}: expected a mapping of {cls.__name__} fields, got {type(data).__name__}")
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise PlannerError(f"{source}: {describe_validation_error(exc, cls)}") from None
