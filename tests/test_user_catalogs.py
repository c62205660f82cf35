"""Catalogs users add to: --catalog DIR, PLANNER_CATALOG_PATH and the user config folder are searched before the
shipped catalogs (a user's entry shadows a shipped one, with a note), and names are case-insensitive with aliases."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from helpers import run_planner

from planner.errors import PlannerError
from planner.io import catalog
from planner.io.catalog import catalog_root, list_hardware, load_engine, load_hardware, load_model

H100 = catalog_root() / "hardware_profiles" / "h100-sxm.yaml"


@pytest.fixture(autouse=True)
def _fresh_catalogs(monkeypatch, tmp_path):
    """No user catalog but the test's own: an empty config folder, no environment path, no --catalog."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv(catalog.CATALOG_ENV, raising=False)
    catalog.set_user_catalogs([])
    yield
    catalog.set_user_catalogs([])


def _user_gpu(root: Path, name: str, hbm_bytes: float) -> Path:
    folder = root / "hardware_profiles"
    folder.mkdir(parents=True, exist_ok=True)
    text = H100.read_text().replace("name: h100-sxm", f"name: {name}")
    text = text.replace("hbm_bytes: ", f"hbm_bytes: {hbm_bytes}  # was ", 1)
    (folder / f"{name}.yaml").write_text(text)
    return folder / f"{name}.yaml"


def test_names_are_case_insensitive_and_take_aliases():
    assert load_hardware("H100-SXM").name == "h100-sxm"
    assert load_hardware("H100").name == "h100-sxm"
    assert load_hardware("a100").name == "a100-80gb"
    assert load_engine("NeMo").name == "megatron"
    assert load_model("Meta-Llama-3-8B").name == "llama3-8b"


def test_an_unknown_name_suggests_case_insensitively():
    with pytest.raises(PlannerError, match='did you mean "h100-sxm"'):
        load_hardware("H100-SX")


def test_environment_path_adds_a_gpu(monkeypatch, tmp_path):
    _user_gpu(tmp_path / "mine", "my-gpu", 100e9)
    monkeypatch.setenv(catalog.CATALOG_ENV, str(tmp_path / "mine"))
    catalog.set_user_catalogs([])  # the environment is read when the index is built
    assert "my-gpu" in list_hardware() and "h100-sxm" in list_hardware()
    assert load_hardware("MY-GPU").gpu.hbm_bytes == 100e9


def test_user_config_folder_is_searched(tmp_path):
    _user_gpu(tmp_path / "config" / "planner", "lab-gpu", 90e9)
    catalog.set_user_catalogs([])
    assert load_hardware("lab-gpu").gpu.hbm_bytes == 90e9


def test_a_user_entry_shadows_the_shipped_one_with_a_note(tmp_path):
    _user_gpu(tmp_path / "mine", "h100-sxm", 70e9)
    catalog.set_user_catalogs([tmp_path / "mine"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hw = load_hardware("h100-sxm")
    assert hw.gpu.hbm_bytes == 70e9
    assert any("shadows the shipped" in str(w.message) for w in caught)
    assert list_hardware().count("h100-sxm") == 1


def test_catalog_option_must_be_a_folder(tmp_path):
    with pytest.raises(PlannerError, match="is not a directory"):
        catalog.set_user_catalogs([tmp_path / "nope"])


def test_catalog_option_must_be_a_folder_in_the_environment_too(monkeypatch, tmp_path):
    monkeypatch.setenv(catalog.CATALOG_ENV, str(tmp_path / "nope"))
    catalog.set_user_catalogs([])  # clears the index: the roots are read again
    with pytest.raises(PlannerError, match=f"{catalog.CATALOG_ENV} names .*nope.*is not a directory"):
        load_model("tiny")


def test_engine_all_is_case_insensitive_as_names_are():
    from planner.api.resolve import resolve_engines

    assert [e.name for e in resolve_engines("ALL", {})] == [e.name for e in resolve_engines("all", {})]


def test_cli_reads_the_environment_catalog(tmp_path):
    _user_gpu(tmp_path / "mine", "my-gpu", 100e9)
    import os

    env_before = os.environ.get(catalog.CATALOG_ENV)
    os.environ[catalog.CATALOG_ENV] = str(tmp_path / "mine")
    try:
        rc, out, err = run_planner("memory", "-m", "tiny", "--gpus", "2", "--hardware", "My-GPU", "--json")
    finally:
        if env_before is None:
            del os.environ[catalog.CATALOG_ENV]
        else:
            os.environ[catalog.CATALOG_ENV] = env_before
    assert rc == 0, err
    assert '"hardware": "my-gpu"' in out


@pytest.mark.parametrize(
    "command",
    [("models",), ("models", "show"), ("hardware",), ("hardware", "show"), ("engines",), ("engines", "show"),
     ("validate",), ("calibrate",), ("ingest",), ("launch",), ("memory",), ("estimate",), ("search",), ("scale",)],
)  # fmt: skip
def test_every_command_that_reads_a_catalog_takes_catalog(command):
    rc, out, err = run_planner(*command, "--help")
    assert rc == 0 and "--catalog" in out, err


def test_a_listing_shows_a_model_of_a_catalog_option(tmp_path):
    folder = tmp_path / "mine" / "model_specs"
    folder.mkdir(parents=True)
    text = (catalog_root() / "model_specs" / "tiny.yaml").read_text()
    (folder / "my-tiny.yaml").write_text(text.replace("name: tiny", "name: my-tiny"))
    rc, out, err = run_planner("models", "--catalog", str(tmp_path / "mine"), "--json")
    assert rc == 0 and '"my-tiny"' in out, err
    rc, out, err = run_planner("models", "show", "My-Tiny", "--catalog", str(tmp_path / "mine"))
    assert rc == 0 and "my-tiny" in out, err


def test_a_user_entry_named_as_a_shipped_alias_says_so(tmp_path):
    _user_gpu(tmp_path / "mine", "h100", 100e9)  # `h100` is an alias of the shipped h100-sxm
    catalog.set_user_catalogs([tmp_path / "mine"])
    with pytest.warns(UserWarning, match="takes 'h100', an alias of the shipped h100-sxm"):
        hw = load_hardware("H100")
    assert hw.name == "h100" and hw.gpu.hbm_bytes == 100e9
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_hardware("h100-sxm").name == "h100-sxm"  # the shipped entry by its own name: nothing to say


def test_a_user_alias_that_another_entry_takes_says_it_is_not_used(tmp_path):
    """A user's entry listing a shipped name as its alias (`aliases: [h200]`), or an alias a shipped entry lists too
    (a renamed copy `hardware show` wrote keeps them), was passed over without a word: the name, or the shipped
    entry's alias, wins. It still does, and says which file's alias is not used."""
    path = _user_gpu(tmp_path / "mine", "my-gpu", 100e9)
    path.write_text(path.read_text().replace("aliases: [", "aliases: [h200, ", 1))
    catalog.set_user_catalogs([tmp_path / "mine"])
    for name, shipped in (("h200", "h200"), ("H100", "h100-sxm")):
        with pytest.warns(
            UserWarning,
            match=rf"'{name.lower()}' is {shipped} \(.*\); the alias '{name.lower()}' that .*my-gpu.yaml lists",
        ):
            assert load_hardware(name).name == shipped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_hardware("my-gpu").gpu.hbm_bytes == 100e9  # by its own name: nothing to say


def test_an_entry_whose_name_is_not_its_files_is_refused(tmp_path):
    """A catalog finds entries by file name: `mine.yaml` saying `name: llama3-70b` listed a second llama3-70b that
    `-m llama3-70b` never found (the audit's case). It is now one line naming both, exit 2."""
    folder = tmp_path / "mine" / "model_specs"
    folder.mkdir(parents=True)
    text = (catalog_root() / "model_specs" / "tiny.yaml").read_text()
    (folder / "mine.yaml").write_text(text.replace("name: tiny", "name: llama3-70b"))
    rc, out, err = run_planner("models", "--catalog", str(tmp_path / "mine"))
    assert rc == 2 and out == "" and "its name 'llama3-70b' is not its file's, 'mine'" in err, err
    assert len(err.strip().splitlines()) == 1


def test_a_shadowing_entry_is_said_once_per_load(tmp_path):
    """The catalog is looked up once per load: a shadowing entry, and the base of a capped name, each say so once."""
    _user_gpu(tmp_path / "mine", "b200", 150e9)
    catalog.set_user_catalogs([tmp_path / "mine"])
    for name in ("b200", "b200-650w"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            load_hardware(name)
        assert sum("shadows the shipped" in str(w.message) for w in caught) == 1, name


def test_a_copy_models_show_wrote_is_found_by_its_block_listed_aliases(tmp_path):
    """`planner models show` writes `aliases:` as a block list; renamed and given an alias of its own, the copy was
    found by its name but its aliases were read in the one-line form only ("unknown model")."""
    code, text, err = run_planner("models", "show", "llama3-8b")
    assert code == 0 and "aliases:\n- " in text, err
    folder = tmp_path / "mine" / "model_specs"
    folder.mkdir(parents=True)
    mine = text.replace("name: llama3-8b", "name: my-8b").replace(
        "- llama-3-8b\n", "- my-alias   # mine\n- 'Quoted-One'\n"
    )  # a comment after an alias is no part of it
    (folder / "my-8b.yaml").write_text(mine)
    catalog.set_user_catalogs([str(tmp_path / "mine")])
    assert load_model("my-alias").name == "my-8b" and load_model("quoted-one").name == "my-8b"
