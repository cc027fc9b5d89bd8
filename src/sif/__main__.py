"""``python -m sif``."""

from sif.cli import main

main()
