"""Pure functions over bytes and numpy arrays: no I/O, no logging, no imports from sif."""
