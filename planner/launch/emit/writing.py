"""What `launch --emit` writes into --out: the target's file and copies of the user's own model, hardware and
engine files. All are checked before any is written, so that a file already there is never replaced without
--force (one with the same text is left as it is: emitting twice is harmless) and a failed write leaves none of
the files it made."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from pathlib import Path

from planner.errors import PlannerError
from planner.io.files import check_writable, read_text, write_text_atomic
from planner.launch.command import RunConfig


@dataclass(frozen=True)
class OutFile:
    path: Path
    text: str
    what: str
    mode: int | None = None  # 0o755 for a script

    def unchanged(self) -> bool:
        """The file is there with this text already."""
        with contextlib.suppress(PlannerError):
            return self.path.is_file() and read_text(self.path) == self.text
        return False


def portable_files(
    cfg: RunConfig, hardware_ref: str, out: Path, *, kind: str, file_name: str
) -> tuple[RunConfig, list[OutFile]]:
    """The run's model, hardware and engine as a cluster node resolves them (a catalog name as is; a file of the
    user's copied next to the emitted files and named relatively, no path of the machine that wrote them), and
    the copies to make. Two files of one name (a model and a hardware profile both x.yaml), or one named as the
    emitted file, would leave one in the other's place: refused naming both."""
    emitted = out / file_name
    sources: dict[Path, tuple[str, Path]] = {emitted: (f"--emit {kind} file", emitted)}

    def portable(ref: str, what: str) -> str:
        path = Path(ref)
        if what == "model" and _hf_folder(ref):  # a Hugging Face model's folder: its config
            path = path / "config.json"
        if not path.is_file():
            return ref
        # a config.json as its folder's name, the name its model takes (hf_config.py): not the name of --out
        target = out / (f"{path.resolve().parent.name}.json" if path.name == "config.json" else path.name)
        other = sources.setdefault(target, (what, path))
        if other[1].resolve() != path.resolve():
            raise PlannerError(
                f"--emit {kind}: the {what} {ref!r} and the {other[0]} {str(other[1])!r} would both be "
                f"{str(target)!r}: rename one"
            )
        return target.name

    cfg = replace(
        cfg,
        model=portable(cfg.model, "model"),
        hardware=portable(hardware_ref, "hardware profile"),
        engine=portable(cfg.engine, "engine profile"),
    )
    # a copy of each file of the user's, but for one already there (a model file given from --out itself)
    return cfg, [OutFile(t, read_text(src), "copy") for t, (_, src) in sources.items() if src.resolve() != t.resolve()]


def _hf_folder(ref: str) -> bool:
    """A model reference that load_model reads as a Hugging Face folder (a catalog name wins over a folder of that
    name here: catalog.model_user_path decides, as load_model does)."""
    from planner.io.catalog import model_user_path

    path = model_user_path(ref)
    return path is not None and path.is_dir() and (path / "config.json").is_file()


def check_replaceable(kind: str, files: list[OutFile], *, force: bool) -> None:
    """One line where a file could not be written, or is there with other text and --force was not given."""
    for f in files:
        check_writable(f.path, what=f"--emit {kind} {f.what}".rstrip())
        if not force and f.path.exists() and not f.unchanged():
            raise PlannerError(
                f"--emit {kind}: {str(f.path)!r} exists with other contents; give --force to replace it, "
                "or another --out"
            )


def script_mode(name: str) -> int | None:
    """A shell script's file mode: executable."""
    return 0o755 if name.endswith((".sh", ".slurm")) else None


def write_files(kind: str, files: list[OutFile]) -> bool:
    """Write every file that is not there already with its text (check_replaceable first); on a failure, remove
    the ones this call made. True when any was written."""
    made: list[Path] = []
    wrote = False
    try:
        for f in files:
            if f.unchanged():
                continue
            existed = f.path.exists()
            write_text_atomic(f.path, f.text, what=f"--emit {kind} {f.what}".rstrip(), mode=f.mode)
            wrote = True
            if not existed:
                made.append(f.path)
    except PlannerError:
        for path in made:
            path.unlink(missing_ok=True)
        raise
    return wrote
