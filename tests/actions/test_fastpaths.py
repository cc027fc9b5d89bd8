"""The fast paths of the actions, each checked against the plain one it replaces.

Journal lines written by hand against ``json_line``; the json report writer
against ``write_dupes``; the bulk-checked report reader against the checked
one; the re-check's compare, which reads exactly the size in one
``pread`` (or in blocks); and temporary names drawn from a pool of random
bytes (each once, a forked child never given its parent's).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.actions import fsops
from sif.actions.journal import begin_line, done_line, step_line
from sif.actions.plan import FileRef, Step
from sif.actions.report import _group_checked, _group_fast, write_report
from sif.actions.verify import Comparer
from sif.errors import InputError
from sif.exact import Group, Replica
from sif.report import json_line, write_dupes
from treeutil import write

# Names as sif meets them: any text, with undecodable bytes as lone surrogates.
names = st.text(
    st.one_of(
        st.characters(blacklist_categories=["Cs"]),
        st.sampled_from(['"', "\\", "\n", "\x00", "\x7f", "\udc80", "\udcff", "é", "😀"]),
    ),
    min_size=1,
    max_size=12,
).map(lambda s: "/r/" + s)
ints = st.integers(0, 2**63 - 1)
refs = st.builds(FileRef, names, ints, ints, ints, ints, ints)
steps = st.builds(
    Step,
    index=st.integers(0, 10**6),
    action=st.sampled_from(["link", "symlink", "reflink", "remove", "trash", "move"]),
    group=st.integers(1, 10**6),
    digest=st.sampled_from(["xxh3-128:00ff", "blake3:ab"]),
    keep=refs,
    drop=refs,
    target=st.one_of(st.none(), names),
    noop=st.one_of(st.none(), st.just("already a hard link of /r/a")),
)


@settings(max_examples=200, deadline=None)
@given(step=steps)
def test_step_line_is_json_line_of_the_step(step: Step) -> None:
    line = step_line(step)
    assert line == json_line({"j": "step", **step.to_dict()})
    assert Step.from_dict({k: v for k, v in json.loads(line).items() if k != "j"}) == step


@settings(max_examples=200, deadline=None)
@given(
    index=st.integers(0, 10**6),
    figures=st.lists(ints, min_size=5, max_size=5),
    names_used=st.dictionaries(st.sampled_from(["tmp", "dest", "info"]), names, max_size=2),
    after=st.lists(ints, min_size=3, max_size=3),
    drop_after=st.one_of(st.none(), st.lists(ints, min_size=3, max_size=3)),
)
def test_begin_and_done_lines_are_json_lines(
    index: int,
    figures: list[int],
    names_used: dict[str, str],
    after: list[int],
    drop_after: list[int] | None,
) -> None:
    meta = dict(zip(("mode", "uid", "gid", "atime_ns", "mtime_ns"), figures, strict=True))
    st_ = SimpleNamespace(**{f"st_{k}": v for k, v in meta.items()})
    at = "2026-12-01T10:00:00.000000+00:00"
    want = {"j": "begin", "step": index, "meta": meta, "at": at, **names_used}
    assert begin_line(index, st_, at, names_used) == json_line(want)  # type: ignore[arg-type]
    want = {"j": "done", "step": index, "keep_after": after, "drop_after": drop_after}
    assert done_line(index, after, drop_after, names_used) == json_line({**want, **names_used})


replicas = st.builds(
    Replica,
    st.lists(names, min_size=1, max_size=3).map(tuple),
    ints,
    ints,
    ints,
    archive=st.one_of(st.none(), names),
    symlinks=st.lists(names, max_size=2).map(tuple),
    ctime_ns=ints,
)
groups = st.builds(
    Group,
    ints,
    st.sampled_from(["xxh3-128:00ff", "blake3:ab"]),
    st.lists(replicas, min_size=2, max_size=4).map(tuple),
)


@settings(max_examples=150, deadline=None)
@given(gs=st.lists(groups, max_size=4))
def test_the_json_report_writer_writes_what_write_dupes_writes(gs: list[Group]) -> None:
    header = {"report": "sif dupes", "format": 1, "roots": ["/r"], "cwd": "/"}
    fast, plain = io.BytesIO(), io.BytesIO()
    write_report(gs, fast, header)
    write_dupes(gs, plain, "json", header=header)
    assert fast.getvalue() == plain.getvalue()


def _file(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "names": ["a", "/abs/b"],
        "dev": 1,
        "ino": 2,
        "size": 5,
        "mtime_ns": 3,
        "ctime_ns": 4,
        "archive": None,
        "symlinks": [],
    }
    doc.update(over)
    return {k: v for k, v in doc.items() if v != "DROP"}


odd_values: st.SearchStrategy[Any] = st.sampled_from(
    [None, True, 1.5, "x", [], {}, "DROP", -1, ["n"], [1]]
)


@settings(max_examples=300, deadline=None)
@given(
    field=st.sampled_from(
        ["names", "dev", "ino", "size", "mtime_ns", "ctime_ns", "archive", "symlinks"]
    ),
    value=odd_values,
    where=st.sampled_from(["file", "size", "digest", "files", "none"]),
)
def test_the_fast_report_reader_accepts_exactly_what_the_checked_one_does(
    field: str, value: Any, where: str
) -> None:
    doc: dict[str, Any] = {"size": 5, "digest": "xxh3-128:00", "files": [_file(), _file(ino=9)]}
    if where == "file":
        doc["files"][1] = _file(**{field: value})
    elif where == "none":
        pass
    elif value == "DROP":
        del doc[where]
    else:
        doc[where] = value
    fast = _group_fast(doc, "/cwd")
    try:
        checked = _group_checked(doc, "/cwd", "line 2")
    except InputError:
        assert fast is None
    else:
        assert fast == checked
        assert fast.replicas[0].paths == ("/cwd/a", "/abs/b")


def test_compare_reads_exactly_the_size_in_one_read_or_in_blocks(tmp_path: Path) -> None:
    data = os.urandom(100)
    write(tmp_path / "a", data)
    write(tmp_path / "longer", data + b"more")
    write(tmp_path / "shorter", data[:99])
    write(tmp_path / "last-byte", data[:99] + bytes([data[99] ^ 1]))
    for block in (1 << 20, 16, 10, 100):  # one pread; blocks with a tail; whole blocks
        c = Comparer(block)
        fds = {n: os.open(tmp_path / n, os.O_RDONLY) for n in os.listdir(tmp_path)}
        try:
            assert c.same(fds["a"], fds["a"], 100)
            # Bytes past the size are not read: the size is the caller's fstat check.
            assert c.same(fds["a"], fds["longer"], 100)
            assert not c.same(fds["a"], fds["shorter"], 100)
            assert not c.same(fds["shorter"], fds["shorter"], 100)
            assert not c.same(fds["a"], fds["last-byte"], 100)
        finally:
            for fd in fds.values():
                os.close(fd)
        assert c.bytes_read > 0


def test_journal_dir_is_platformdirs_state_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """The journal directory made without platformdirs is the one platformdirs names."""
    import platformdirs

    from sif.actions.journal import journal_dir

    for xdg, home in [
        ("/x/state", "/home/u"),
        (None, "/home/u"),
        (None, "/home/u/"),
        ("relative/state", "/home/u"),
        ("", "/"),
        (None, None),
    ]:
        for var, value in (("XDG_STATE_HOME", xdg), ("HOME", home)):
            if value is None:
                monkeypatch.delenv(var, raising=False)
            else:
                monkeypatch.setenv(var, value)
        assert journal_dir() == os.path.join(platformdirs.user_state_dir("sif"), "journals")


def test_hostname_is_socket_gethostname() -> None:
    import socket

    from sif.actions.report import hostname

    assert hostname() == socket.gethostname()


def test_temp_names_are_random_distinct_and_not_shared_with_a_forked_child(
    tmp_path: Path,
) -> None:
    import re

    names = [fsops.temp_name(str(tmp_path)) for _ in range(3 * fsops._Random.DRAW + 5)]
    assert len(set(names)) == len(names)  # across three refills of the pool
    pattern = re.compile(re.escape(str(tmp_path)) + r"/\.sif-[0-9a-f]{16}\.tmp")
    assert all(pattern.fullmatch(n) for n in names)
    assert len({n[-12] for n in names}) == 16  # every hex digit appears
    fsops.temp_name(str(tmp_path))  # the pool is not empty now
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        os.write(w, "\n".join(fsops.temp_name("") for _ in range(50)).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        child = set(f.read().split("\n"))
    os.waitpid(pid, 0)
    parent = {fsops.temp_name("") for _ in range(50)}
    assert len(child) == 50 and not child & parent
