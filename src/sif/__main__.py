"""``python -m sif``."""

from sif.cli import run

run()
