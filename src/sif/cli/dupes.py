"""``sif dupes``: work in progress."""

import click


@click.command()
def dupes() -> None:
    """Groups of exact replicas (in progress)."""
    raise click.ClickException("not yet")
