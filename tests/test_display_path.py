"""display_path: every name shown so that no two names look alike (the text and html reports)."""

from __future__ import annotations

import os
import subprocess

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sif.events import display_path


def _read_back(shown: str) -> bytes:
    """The bytes a shown name stands for: bash reads a quoted one, any other is itself."""
    if not shown.startswith("$'"):
        return shown.encode("utf-8")
    done = subprocess.run(
        ["bash", "-c", f"printf %s {shown}"], capture_output=True, check=True, timeout=30
    )
    return done.stdout


@settings(max_examples=60, deadline=None)
@given(name=st.binary(min_size=1, max_size=24).filter(lambda b: b"\0" not in b))
@example(name=b"$'x\\xff'")  # a valid name that reads as a quoted one
@example(name=b"x\xff")
@example(name=b"$'")
@example(name=b"/tmp/$'a'")
def test_a_shown_name_reads_back_as_the_name_it_shows(name: bytes) -> None:
    """The shown form is valid UTF-8 and stands for exactly the name's bytes: a quoted one
    through bash's $'...', any other as it is (never beginning as a quoted one does)."""
    shown = display_path(os.fsdecode(name))
    shown.encode("utf-8")  # no surrogate left
    assert _read_back(shown) == name
