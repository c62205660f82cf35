"""Reading and writing files the tool owns: every failure is one PlannerError line naming the path, and a
write is atomic (a temporary file beside the target, then a rename), so a failed write leaves nothing
half-written and never replaces a good file. Inside `taken_back_on_failure` (the CLI's commands) the files written
are taken back when the command fails after writing them: a command that exits non-zero leaves no output."""

from __future__ import annotations

import contextlib
import math
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from planner.errors import PlannerError


def _reason(e: BaseException) -> str:
    return getattr(e, "strerror", None) or e.__class__.__name__


def names_folder(path: str | Path) -> bool:
    """The name can only be a folder's: '', '.', '..', or a trailing '/' (which Path drops)."""
    return Path(path).name in ("", ".", "..") or str(path).endswith("/")


def _file_named(path: str | Path, what: str) -> Path:
    """`path` as a file's, or one line where it names a folder (names_folder)."""
    target = Path(path)
    if names_folder(path):
        raise PlannerError(f"cannot write {what} {str(path)!r}: that is a folder, give a file name")
    return target


def check_writable(path: str | Path, *, what: str = "file") -> None:
    """What write_text_atomic would refuse, found before anything is written, so that a command with several
    outputs writes none when one of them cannot be: a folder's name, an existing folder, a file in the way of its
    folders, or a folder that takes no file (probed with a file made and removed there)."""
    target = _file_named(path, what)
    if target.is_dir():
        raise PlannerError(f"cannot write {what} {str(path)!r}: that is a folder, give a file name")
    folder = next((p for p in target.parents if p.exists()), Path("."))
    try:
        if not folder.is_dir():
            raise NotADirectoryError(20, f"{folder} is a file")
        probe_writable(folder)
    except OSError as e:
        raise PlannerError(f"cannot write {what} {str(path)!r}: {_reason(e)}") from None


def distinct_outputs(*named: tuple[str, str | None]) -> None:
    """Outputs (option, path) a command writes: two naming one file would leave only the last (audit: --save and
    --plot of one name kept the plot, and the plan file it said it saved was gone)."""
    seen: dict[Path, str] = {}
    for option, path in named:
        if path:
            key = Path(path).resolve()
            if key in seen:
                raise PlannerError(f"{seen[key]} and {option} {path} name the same file; give each its own")
            seen[key] = f"{option} {path}"


def probe_writable(folder: Path) -> None:
    """OSError unless `folder` takes a file: one is made there and removed (permissions alone do not say, as root)."""
    probe = folder / f".planner-write-test-{os.getpid()}"
    probe.write_text("")
    probe.unlink()


_journal: list[tuple[Path, bytes | None]] | None = None  # the files written, with what each held before (None: new)


@contextlib.contextmanager
def taken_back_on_failure() -> Iterator[None]:
    """The files written inside (write_text_atomic, `recorded`) restored to what they held, or removed where they
    were new, when the block raises anything but SystemExit(0): `search --save plan.yaml > /dev/full` had kept the
    plan file of a command that failed (exit 2). The folders made for them are left."""
    global _journal
    outer, _journal = _journal, []
    try:
        yield
    except SystemExit as e:
        if e.code not in (0, None):
            _take_back(_journal)
        raise
    except BaseException:
        _take_back(_journal)
        raise
    finally:
        _journal = outer


def recorded(path: Path) -> None:
    """Note that `path` is about to be written: what it holds now is restored if the command fails."""
    if _journal is not None and all(p != path for p, _ in _journal):
        with contextlib.suppress(OSError):
            _journal.append((path, path.read_bytes() if path.is_file() else None))


def _take_back(journal: list[tuple[Path, bytes | None]]) -> None:
    for path, before in reversed(journal):
        with contextlib.suppress(OSError):
            if before is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(before)


def write_text_atomic(
    path: str | Path, text: str, *, what: str = "file", mode: int | None = None, kept: bool = False
) -> Path:
    """Write `text` to `path` atomically (parent folders created); PlannerError on any failure. `kept`: a file a
    launched run writes for itself (its checkpoint manifest), kept whatever the command's exit; else taken back if
    the command fails (taken_back_on_failure)."""
    target = _file_named(path, what)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if not kept:
            recorded(target)
        tmp.write_text(text)
        if mode is not None:
            tmp.chmod(mode)
        tmp.replace(target)
    except (OSError, ValueError) as e:  # ValueError: a path with a NUL byte
        # the temporary file may never have been created (the folder is not writable, or not a folder)
        with contextlib.suppress(OSError, ValueError):
            tmp.unlink(missing_ok=True)
        raise PlannerError(f"cannot write {what} {str(path)!r}: {_reason(e)}") from None
    return target


def make_dir(path: str | Path, *, what: str = "folder") -> Path:
    """Create a folder (and its parents); PlannerError when it cannot be (a file in the way, no permission)."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not folder.is_dir():
            raise NotADirectoryError(20, "Not a directory")
    except (OSError, ValueError) as e:
        raise PlannerError(f"cannot create {what} {str(path)!r}: {_reason(e)}") from None
    return folder


def require_file(path: str | Path, expected: str, *, missing: str = "no such file") -> Path:
    """`path` where it is a file; else one line, said one way wherever a file is read: "NAME: is a folder, give
    EXPECTED" or "NAME: MISSING" (the hint where the command has one)."""
    p = Path(path)
    if p.is_dir():
        raise PlannerError(f"{path}: is a folder, give {expected}")
    if p.exists() and not p.is_file():
        raise PlannerError(f"{path}: not a regular file (a device, a pipe or a socket), give {expected}")
    if not p.is_file():
        raise PlannerError(f"{path}: {missing}")
    return p


# The largest text file read whole: a training log of a long run is hundreds of MB; /dev/zero is endless (audit).
MAX_TEXT_BYTES = 2 << 30


def read_text(
    path: str | Path, *, display: str | None = None, lenient: bool = False, max_bytes: int = MAX_TEXT_BYTES
) -> str:
    """A text file's contents (a pipe's: _pipe_bytes); PlannerError for a missing file, a folder, a device or a
    socket (a device may never end), a file over `max_bytes`, a symlink loop, a name too long, no permission or bytes
    that are not UTF-8, or UTF-16 with its byte-order mark (_decoded; `lenient`: such bytes read as U+FFFD, as a
    training log may hold a stray byte of another encoding in a line the readers never look at)."""
    p = Path(path)
    name = display or str(path)
    try:
        mode = p.stat()
        if stat.S_ISFIFO(mode.st_mode):  # a shell's <(...): read what its writer gives, never wait for one
            return _decoded(_pipe_bytes(p, max_bytes, name), lenient)
        if not stat.S_ISREG(mode.st_mode) and not stat.S_ISDIR(mode.st_mode):
            raise PlannerError(f"{name}: not a regular file (a device or a socket); give a file")
        if mode.st_size > max_bytes:
            raise PlannerError(f"{name}: {mode.st_size} bytes is too large to read (max {max_bytes})")
        return _decoded(p.read_bytes(), lenient)
    except FileNotFoundError:
        raise PlannerError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise PlannerError(f"{name}: is a folder, give a file") from None
    except UnicodeDecodeError:
        raise PlannerError(f"{name}: not a text file (not UTF-8)") from None
    except (OSError, ValueError) as e:
        raise PlannerError(f"{name}: cannot read ({_reason(e)})") from None


def _decoded(data: bytes, lenient: bool) -> str:
    """UTF-8 text (its byte-order mark dropped), or UTF-16 where its byte-order mark says so (what Windows
    PowerShell's `>` writes: a log redirected there read as 'NUL bytes', audit); newlines as Python's text mode
    reads them."""
    errors = "replace" if lenient else "strict"
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        text = data.decode("utf-16", errors=errors)
    else:
        text = data.decode("utf-8-sig", errors=errors)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _pipe_bytes(path: Path, max_bytes: int, name: str) -> bytes:
    """A pipe's bytes up to `max_bytes`: opened without waiting for a writer (O_NONBLOCK; with none, it reads as
    empty at once, where a plain open waited forever), then read to its end."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise PlannerError(f"{name}: more than {max_bytes} bytes is too large to read")
    return data


def finite_json(value: Any) -> Any:
    """`value` with every non-finite float as null: strict JSON (no NaN, no Infinity), which every parser reads."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def check_ours(path: str | Path, *, option: str, what: str, ours: Callable[[Any], bool]) -> None:
    """A file already at `path` is replaced only where it holds what `option` writes (`ours(document)`: a plan
    file, a runs file) or nothing; anything else (notes, another tool's YAML) is refused, naming it, before
    anything is written: `search --save` and `ingest -o` replaced such files without a word."""
    target = Path(path)
    if not target.is_file() or target.stat().st_size == 0:
        return
    import yaml

    try:
        doc = yaml.safe_load(target.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        doc = None
    if not ours(doc):
        raise PlannerError(
            f"{option} {path}: the file there is not {'an' if what[0] in 'aeiou' else 'a'} {what} this command "
            "wrote; give another name, or remove it"
        )


def document_text(path: str | Path, doc: Any, *, header: str = "") -> str:
    """`doc` as the file at `path` is named: JSON for a `.json` name (indented, strict; JSON has no comment, so the
    header is left out), YAML with `header` as its first comment line otherwise. Both read back alike, as YAML
    holds JSON: `search --save plan.json` wrote YAML under a JSON name that a JSON parser refused."""
    if Path(path).suffix.lower() == ".json":
        import json

        return json.dumps(finite_json(doc), indent=2, allow_nan=False) + "\n"
    import yaml

    comment = "".join(f"# {line}\n" for line in header.splitlines())
    text: str = yaml.safe_dump(doc, sort_keys=False)
    return comment + text
