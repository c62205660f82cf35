"""`planner models`, `planner hardware`, `planner engines`: list a catalog, or `show NAME` one entry."""

from __future__ import annotations

from typing import Annotated

import typer

from planner.cli.options import CatalogOpt, JsonOpt
from planner.render.console import emit_json, out

models_app = typer.Typer(help="The model catalog (model_specs/).", invoke_without_command=True)
hardware_app = typer.Typer(help="The hardware catalog (hardware_profiles/).", invoke_without_command=True)
engines_app = typer.Typer(
    help="The engine catalog (engine_profiles/): the training stacks a plan can run on.", invoke_without_command=True
)


def _passed_on(ctx: typer.Context, as_json: bool) -> bool:
    """Whether a subcommand runs instead of the listing: the group's --json then goes to it (`models --json show`)."""
    if ctx.invoked_subcommand:
        ctx.obj = {"json": as_json}
        return True
    return False


def _json_given(ctx: typer.Context) -> bool:
    """--json given to the group before the subcommand."""
    parent = ctx.parent.obj if ctx.parent is not None else None
    return bool(isinstance(parent, dict) and parent.get("json"))


@models_app.callback()
def models(ctx: typer.Context, as_json: JsonOpt = False, catalog: CatalogOpt = None) -> None:
    """List the model catalog."""
    if _passed_on(ctx, as_json):
        return
    from planner.io.catalog import list_models, load_model
    from planner.render.listings import models_json, print_models

    specs = [load_model(n) for n in list_models()]
    if as_json:
        emit_json(models_json(specs))
    else:
        print_models(out, specs)


@models_app.command("show")
def models_show(ctx: typer.Context, name: str, as_json: JsonOpt = False, catalog: CatalogOpt = None) -> None:
    """Print one model spec and its derived parameter counts."""
    from planner.io.catalog import load_model
    from planner.render.listings import model_doc, print_model

    spec = load_model(name)
    if as_json or _json_given(ctx):
        emit_json(model_doc(spec))
    else:
        print_model(out, spec)


@hardware_app.callback()
def hardware(ctx: typer.Context, as_json: JsonOpt = False, catalog: CatalogOpt = None) -> None:
    """List the hardware catalog."""
    if _passed_on(ctx, as_json):
        return
    from planner.io.catalog import list_hardware, load_hardware
    from planner.render.listings import print_hardware

    profiles = [load_hardware(n) for n in list_hardware()]
    if as_json:
        emit_json({"hardware": [p.model_dump() for p in profiles]})
    else:
        print_hardware(out, profiles)


@hardware_app.command("show")
def hardware_show(ctx: typer.Context, name: str, as_json: JsonOpt = False, catalog: CatalogOpt = None) -> None:
    """Print one hardware profile."""
    from planner.io.catalog import load_hardware
    from planner.render.listings import print_document

    doc = load_hardware(name).model_dump()
    if as_json or _json_given(ctx):
        emit_json(doc)
    else:
        print_document(out, doc)


@engines_app.callback()
def engines(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    wide: Annotated[
        bool, typer.Option("--wide", help="more columns: the attention kernel, the gradient dtype")
    ] = False,
    catalog: CatalogOpt = None,
) -> None:
    """List the engine catalog: what each training stack runs."""
    if wide and ctx.invoked_subcommand:
        raise typer.BadParameter(
            "lists more columns of the catalog; `show` prints the whole profile", param_hint="--wide"
        )
    if _passed_on(ctx, as_json):
        return
    from planner.io.catalog import list_engines, load_engine
    from planner.render.listings import engines_json, print_engines

    profiles = [load_engine(n) for n in list_engines()]
    if as_json:
        emit_json(engines_json(profiles))
    else:
        print_engines(out, profiles, wide=wide)


@engines_app.command("show")
def engines_show(ctx: typer.Context, name: str, as_json: JsonOpt = False, catalog: CatalogOpt = None) -> None:
    """Print one engine profile."""
    from planner.io.catalog import load_engine
    from planner.render.listings import print_document

    doc = load_engine(name).model_dump()
    if as_json or _json_given(ctx):
        emit_json(doc)
    else:
        print_document(out, doc)
