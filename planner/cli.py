"""Typer commands only: parse options, call one library function, render. (Filled in below.)"""

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True)


def main() -> None:
    app()
