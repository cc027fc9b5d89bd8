"""Keep policies and plans, on real trees; reports that are refused."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import pytest

from actionutil import report_of, sif
from sif.actions import KeepPolicy, plan_actions, read_report
from sif.errors import ConfigError, InputError
from treeutil import write

DATA = b"the same bytes\n" * 10


def kept_and_dropped(plan) -> tuple[set[str], set[str]]:  # type: ignore[no-untyped-def]
    return {s.keep.path for s in plan.steps}, {s.drop.path for s in plan.active}


def test_first_root_keeps_the_copy_under_the_earliest_root(tmp_path: Path) -> None:
    for d in ("z", "a", "m"):
        write(tmp_path / d / "f", DATA)
    roots = [tmp_path / "z", tmp_path / "a", tmp_path / "m"]
    plan = plan_actions(report_of(*roots), "link", "first-root")
    kept, dropped = kept_and_dropped(plan)
    assert kept == {str(tmp_path / "z/f")}
    assert dropped == {str(tmp_path / "a/f"), str(tmp_path / "m/f")}
    # Another root order, another kept copy.
    plan = plan_actions(report_of(*reversed(roots)), "link", "first-root")
    assert kept_and_dropped(plan)[0] == {str(tmp_path / "m/f")}


@pytest.mark.parametrize(("rule", "winner"), [("newest", "b"), ("oldest", "c")])
def test_newest_and_oldest(tmp_path: Path, rule: str, winner: str) -> None:
    for i, d in enumerate(("a", "b", "c")):
        write(tmp_path / d, DATA)
        t = [2_000_000_000, 3_000_000_000, 1_000_000_000][i]
        os.utime(tmp_path / d, ns=(t, t))
    plan = plan_actions(report_of(tmp_path), "remove", rule)
    assert kept_and_dropped(plan)[0] == {str(tmp_path / winner)}
    assert len(plan.active) == 2


@pytest.mark.parametrize(
    ("rule", "winner"), [("shortest-path", "x"), ("longest-path", "deep/er/x")]
)
def test_shortest_and_longest_path(tmp_path: Path, rule: str, winner: str) -> None:
    for name in ("x", "deep/x", "deep/er/x"):
        write(tmp_path / name, DATA)
    plan = plan_actions(report_of(tmp_path), "link", rule)
    assert kept_and_dropped(plan)[0] == {str(tmp_path / winner)}


def test_rules_break_ties_in_order_then_the_path(tmp_path: Path) -> None:
    for name in ("b1", "a1", "ccc"):
        write(tmp_path / name, DATA)
        os.utime(tmp_path / name, ns=(5, 5))
    # Same mtime for all: newest ties, shortest-path leaves a1 and b1, the path picks a1.
    plan = plan_actions(report_of(tmp_path), "link", ["newest", "shortest-path"])
    assert kept_and_dropped(plan)[0] == {str(tmp_path / "a1")}


def test_keep_path_is_never_dropped_and_all_protected_is_left_alone(tmp_path: Path) -> None:
    for name in ("a/f", "b/f", "keep/f"):
        write(tmp_path / name, DATA)
    write(tmp_path / "keep/g", b"other content\n")
    write(tmp_path / "keep/h", b"other content\n")
    policy = KeepPolicy(rules=("first-root",), keep_paths=("*/keep/*",))
    plan = plan_actions(report_of(tmp_path), "remove", policy)
    kept, dropped = kept_and_dropped(plan)
    assert kept == {str(tmp_path / "keep/f")}
    assert dropped == {str(tmp_path / "a/f"), str(tmp_path / "b/f")}
    assert plan.left_alone == 1  # keep/g and keep/h: both protected


def test_only_path_limits_what_may_go(tmp_path: Path) -> None:
    for name in ("a/f", "b/f", "c/f.bak"):
        write(tmp_path / name, DATA)
    policy = KeepPolicy(only_paths=("*.bak",))
    plan = plan_actions(report_of(tmp_path), "remove", policy)
    assert kept_and_dropped(plan)[1] == {str(tmp_path / "c/f.bak")}


def test_rf_over_keeps_n_copies(tmp_path: Path) -> None:
    for d in "abcd":
        write(tmp_path / d, DATA)
    plan = plan_actions(report_of(tmp_path), "remove", KeepPolicy(rf_over=3))
    assert kept_and_dropped(plan)[1] == {str(tmp_path / "d")}
    plan = plan_actions(report_of(tmp_path), "remove", KeepPolicy(rf_over=4))
    assert plan.steps == [] and plan.left_alone == 1
    with pytest.raises(ConfigError):
        KeepPolicy(rf_over=0)
    with pytest.raises(ConfigError):
        KeepPolicy(rules=("random",))


def test_hardlinks_of_the_kept_copy_are_noops_and_every_name_of_a_drop_is_a_step(
    tmp_path: Path,
) -> None:
    write(tmp_path / "a", DATA)
    os.link(tmp_path / "a", tmp_path / "a2")
    write(tmp_path / "b", DATA)
    os.link(tmp_path / "b", tmp_path / "b2")
    plan = plan_actions(report_of(tmp_path), "link")
    assert [s.drop.path for s in plan.noops] == [str(tmp_path / "a2")]
    assert "already a hard link" in (plan.noops[0].noop or "")
    assert {s.drop.path for s in plan.active} == {str(tmp_path / "b"), str(tmp_path / "b2")}


def test_archive_members_are_never_acted_on(tmp_path: Path) -> None:
    write(tmp_path / "plain", DATA)
    with zipfile.ZipFile(tmp_path / "z.zip", "w") as z:
        z.writestr("inner", DATA)
        z.writestr("inner2", DATA)
    report = report_of(tmp_path, archives=True)
    assert any(r.archive for g in report.groups for r in g.replicas)
    for action in ("link", "remove"):
        plan = plan_actions(report, action)
        assert plan.steps == []
        assert plan.left_alone == len(report.groups)


def test_the_report_round_trips_every_field(tmp_path: Path) -> None:
    write(tmp_path / "a", DATA)
    write(tmp_path / "b", DATA)
    saved = tmp_path / "r.json"
    r = sif("dupes", "--format", "json", "-q", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0
    saved.write_text(r.stdout)
    header, group = (json.loads(x) for x in r.stdout.splitlines())
    assert header["sif_version"] and header["args"][-1] == str(tmp_path) and header["time"]
    st = os.stat(tmp_path / "a")
    entry = next(f for f in group["files"] if f["names"] == [str(tmp_path / "a")])
    assert (entry["dev"], entry["ino"], entry["size"]) == (st.st_dev, st.st_ino, st.st_size)
    assert (entry["mtime_ns"], entry["ctime_ns"]) == (st.st_mtime_ns, st.st_ctime_ns)
    assert group["digest"].startswith("xxh3-128:")
    report = read_report(str(saved))
    assert report.groups[0].replicas[0].ctime_ns == st.st_ctime_ns


def test_relative_report_paths_resolve_against_the_report_cwd(tmp_path: Path) -> None:
    write(tmp_path / "d/a", DATA)
    write(tmp_path / "d/b", DATA)
    r = sif("dupes", "--format", "json", "-q", "d", cwd=tmp_path)
    report = read_report(io.BytesIO(r.stdout.encode()))
    assert report.groups[0].paths == (str(tmp_path / "d/a"), str(tmp_path / "d/b"))


def _header(**changes: object) -> bytes:
    from sif.actions.report import dupes_header

    h = dupes_header(["/x"], ["dupes"]) | changes
    return json.dumps(h).encode() + b"\n"


def _group_line(name: str) -> bytes:
    """A well-formed group of two files, the first named ``name`` (JSON text as written)."""
    files = [
        f'{{"names":["{n}"],"dev":1,"ino":{i},"size":5,"mtime_ns":1,"ctime_ns":1,'
        '"archive":null,"symlinks":[]}'
        for i, n in enumerate((name, "/a/b"), 1)
    ]
    return (
        f'{{"size":5,"digest":"xxh3-128:00","paths":["{name}","/a/b"],"hardlinks":[[],[]],'
        f'"symlinks":[[],[]],"files":[{",".join(files)}]}}\n'
    ).encode()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"", "empty report"),
        (b"2 files of 11 bytes\n/a\n/b\n", "not a sif dupes report"),
        (b'{"size": 1, "digest": "x", "paths": ["/a", "/b"]}\n', "not a sif dupes report"),
        (_header(format=0), "report format 0"),
        (_header(host="elsewhere", machine_id="0" * 32), "another machine"),
        (_header() + b"{broken\n", "line 2: not JSON"),
        (_header() + b'{"size": 1}\n', "line 2: not a group"),
        (b'{"bytes":5,"files":1,"paths":["d/x","d/y"]}\n', "a 'sif dupes --dirs' report"),
        (_header(cwd=None), "header is malformed"),
        (_header(roots=[1]), "header is malformed"),
        (_header(roots="/x"), "header is malformed"),
        (_header() + _group_line("/a/\\ud800x"), "line 2: a name no file can have"),
        (_header() + _group_line("/a/\\udfffx"), "line 2: a name no file can have"),
        (  # a surrogate as raw bytes (ED A0 80), which json.loads of bytes lets through
            _header() + _group_line("/a/RAWx").replace(b"RAW", b"\xed\xa0\x80"),
            "line 2: a name no file can have",
        ),
    ],
)
def test_bad_reports_are_refused_with_a_clear_message(
    tmp_path: Path, text: bytes, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        read_report(io.BytesIO(text))
    (tmp_path / "r").write_bytes(text)
    write(tmp_path / "a", DATA)
    r = sif("link", str(tmp_path / "r"))
    assert r.returncode == 3
    assert message in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1


def test_move_refuses_two_files_bound_for_one_destination(tmp_path: Path) -> None:
    for d in ("r1", "r2", "r3"):
        write(tmp_path / d / "f", DATA)
    roots = [tmp_path / "r1", tmp_path / "r2", tmp_path / "r3"]
    plan = plan_actions(report_of(*roots), "move", to=str(tmp_path / "to"))
    assert [s.target for s in plan.active] == [str(tmp_path / "to/f")]
    assert plan.refused == [
        f"group 1 ({plan.steps[0].digest}, kept copy {tmp_path}/r1/f): {tmp_path}/r3/f: "
        f"{tmp_path}/to/f exists in the plan: not moved"
    ]


def test_a_file_that_symlinks_name_is_never_dropped(tmp_path: Path) -> None:
    """With ``sif dupes -L`` a file can be reached through a symlink: dropping it would
    leave the link dangling, so it is kept (and the report says which names are links)."""
    write(tmp_path / "t/a", DATA)
    write(tmp_path / "t/b", DATA)
    os.symlink(tmp_path / "t/b", tmp_path / "t/link-to-b")
    report = report_of(tmp_path / "t", follow_symlinks=True)
    (group,) = report.groups
    b = next(r for r in group.replicas if str(tmp_path / "t/b") in r.paths)
    assert b.symlinks == (str(tmp_path / "t/link-to-b"),)  # read back from the report
    for rule in ("shortest-path", "longest-path", "newest", "oldest"):
        plan = plan_actions(report, "remove", rule)
        assert kept_and_dropped(plan)[1] == {str(tmp_path / "t/a")}, rule


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (b"{broken", "not JSON"),
        (b'{"size": 1}', "not a group"),
        (b'{"size": 1}, {"size": 2}', "not JSON"),  # a comma at the top level: two values
        (b"[1", "not JSON"),  # joined with the next lines it would parse as an array
    ],
)
def test_a_bad_line_deep_in_a_long_report_is_named_by_its_number(
    tmp_path: Path, bad: bytes, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines are decoded many at a time; a bad one, in any chunk, is still named exactly."""
    from sif.actions import report as report_mod

    monkeypatch.setattr(report_mod, "CHUNK_LINES", 3)
    write(tmp_path / "a", DATA)
    write(tmp_path / "b", DATA)
    saved = tmp_path / "r.json"
    saved.write_text(sif("dupes", "--format", "json", "-q", str(tmp_path)).stdout)
    header, group = saved.read_bytes().splitlines()
    good = [header] + [group] * 4 + [b""]  # a blank line is skipped, not refused
    assert len(read_report(io.BytesIO(b"\n".join([*good, group]) + b"\n")).groups) == 5
    for at in range(1, 9):  # lines 2..9: each chunk, each place in one
        lines = [header] + [group] * 8
        lines[at] = bad
        with pytest.raises(InputError, match=f"line {at + 1}: {message}"):
            read_report(io.BytesIO(b"\n".join([*lines, b"2]", b"3"]) + b"\n"))


@pytest.mark.parametrize("action", ["remove", "link", "symlink", "trash"])
def test_one_file_listed_twice_is_refused_and_kept(tmp_path: Path, action: str) -> None:
    """A report that lists one file as two replicas (by hand, or from a sif that walked
    ``d/f`` and ``/abs/d/f`` as two files) is refused for the group: the action would
    drop the only copy for itself. Every action: nothing changes, exit 1."""
    write(tmp_path / "d/f", DATA)
    write(tmp_path / "d/g", DATA)
    report_of(tmp_path / "d", path=tmp_path / "r.json")
    header, line = (tmp_path / "r.json").read_bytes().splitlines()
    group = json.loads(line)
    first = group["files"][0]
    other = dict(first, names=[first["names"][0].replace("/d/", "/d/./")])
    group["files"] = [first, other]
    group["paths"] = [first["names"][0], other["names"][0]]
    (tmp_path / "r.json").write_bytes(header + b"\n" + json.dumps(group).encode() + b"\n")
    os.unlink(tmp_path / "d/g")
    plan = plan_actions(read_report(io.BytesIO((tmp_path / "r.json").read_bytes())), "remove")
    assert not plan.steps and len(plan.refused) == 1
    assert "are one file (the same device and inode), listed twice" in plan.refused[0]
    args = {"remove": ["remove"], "link": ["link"], "symlink": ["link", "--symlink"]}
    done = sif(
        *args.get(action, ["remove", "--trash"]),
        str(tmp_path / "r.json"),
        cwd=tmp_path,
        env={"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_STATE_HOME": str(tmp_path / "st")},
    )
    assert done.returncode == 1, done.stderr
    assert (tmp_path / "d/f").read_bytes() == DATA and not (tmp_path / "d/f").is_symlink()
    assert os.listdir(tmp_path / "d") == ["f"]


def test_a_symlink_root_to_a_file_still_protects_it(tmp_path: Path) -> None:
    """`sif dupes e/c d/f d/sf` (d/sf -> f): d/sf is a name of its own, a symbolic link to
    d/f, which the actions then never drop (eb989d1 merged it into d/f, and remove
    deleted d/f, leaving d/sf dangling)."""
    write(tmp_path / "d/f", DATA)
    os.symlink("f", tmp_path / "d/sf")
    write(tmp_path / "e/c", DATA)
    out = sif("dupes", "--format", "json", "e/c", "d/f", "d/sf", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (tmp_path / "r.json").write_text(out.stdout)
    done = sif(
        "remove", str(tmp_path / "r.json"), cwd=tmp_path, env={"XDG_STATE_HOME": str(tmp_path)}
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "d/sf").read_bytes() == DATA and not (tmp_path / "e/c").exists()


def test_dupes_names_a_file_given_twice_once_so_remove_keeps_it(tmp_path: Path) -> None:
    """The report of `sif dupes d/f /abs/d/f` has no group (it listed the file as its own
    replica, and `sif remove` of it deleted the only copy, exit 0)."""
    write(tmp_path / "d/f", DATA)
    os.symlink(tmp_path / "d", tmp_path / "e")
    out = sif("dupes", "--format", "json", "d/f", str(tmp_path / "d/f"), "e/f", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 1  # the header alone
    (tmp_path / "r.json").write_text(out.stdout)
    done = sif(
        "remove", str(tmp_path / "r.json"), cwd=tmp_path, env={"XDG_STATE_HOME": str(tmp_path)}
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "d/f").read_bytes() == DATA
