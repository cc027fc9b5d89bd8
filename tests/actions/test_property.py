"""Property tests: for random trees and policies, no content is ever lost."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionutil import report_of, snapshot
from sif.actions import KEEP_RULES, KeepPolicy, plan_actions, run_plan

CONTENTS = [b"alpha\n", b"bravo\n" * 50, b"charlie" * 700, b"delta\n"]
NAMES = ["a", "b", "c", "x.bak", "y.bak"]
DIRS = ["r1", "r1/sub", "r2", "r2/deep/er"]

files = st.lists(
    st.tuples(st.sampled_from(DIRS), st.sampled_from(NAMES), st.sampled_from(CONTENTS)),
    min_size=4,
    max_size=14,
)
policies = st.builds(
    KeepPolicy,
    rules=st.lists(st.sampled_from(KEEP_RULES), min_size=1, max_size=3).map(tuple),
    keep_paths=st.sampled_from([(), (), ("*.bak",), ("*/sub/*", "a")]),
    only_paths=st.sampled_from([(), (), ("*/r2/*",), ("*.bak", "c")]),
    rf_over=st.integers(1, 3),
)


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    tree=files,
    links=st.lists(st.tuples(st.integers(0, 13), st.sampled_from(NAMES)), max_size=3),
    policy=policies,
    action=st.sampled_from(["remove", "link", "move", "symlink"]),
    root_order=st.booleans(),
    mtimes=st.lists(st.integers(1, 5), min_size=14, max_size=14),
)
def test_every_content_survives_and_nothing_outside_is_touched(
    tree: list[tuple[str, str, bytes]],
    links: list[tuple[int, str]],
    policy: KeepPolicy,
    action: str,
    root_order: bool,
    mtimes: list[int],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(base / "state")
        for i, (d, name, data) in enumerate(tree):
            p = base / d / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
            os.utime(p, ns=(mtimes[i] * 10**9, mtimes[i] * 10**9))
        made = [base / d / n for d, n, _ in tree]
        for i, name in links:
            if i < len(made) and not (made[i].parent / f"hl-{name}").exists():
                os.link(made[i], made[i].parent / f"hl-{name}")
        outside = base / "outside"
        for data in CONTENTS:
            outside.mkdir(exist_ok=True)
            (outside / f"{len(data)}").write_bytes(data)
        roots = [base / "r1", base / "r2"]
        roots = [r for r in (roots if root_order else roots[::-1]) if r.exists()]
        before = {p: v for r in roots for p, v in snapshot(r).items()}
        outside_before = snapshot(outside)
        distinct = {v[1] for v in before.values()}
        report = report_of(*roots)
        in_report = {p for g in report.groups for p in g.all_paths}
        to = str(base / "moved") if action == "move" else None
        plan = plan_actions(report, action, policy, to=to)
        result = run_plan(plan)
        assert (result.skipped, result.failed) == (0, 0), result.problems
        if action == "move":  # two files with one path under their roots: one is refused
            assert all(" exists in the plan: not moved" in m for m in plan.refused)

        after = {p: v for r in roots for p, v in snapshot(r).items()}
        # Every distinct content is still there under the roots, at least once.
        assert {Path(p).read_bytes() for p in after} >= distinct
        # Nothing outside the report was touched: not outside the roots, not in them.
        assert snapshot(outside) == outside_before
        for p, v in before.items():
            if p not in in_report:
                assert after[p] == v
        # Protected files stay as they were.
        for g in report.groups:
            for r in g.replicas:
                for p in r.paths:
                    name = os.path.basename(p)
                    globs = policy.keep_paths
                    import fnmatch

                    if any(fnmatch.fnmatchcase(p if "/" in gl else name, gl) for gl in globs):
                        assert after[p] == before[p]
        if action in ("link", "symlink"):
            assert {p: Path(p).read_bytes() for p in before} == {p: v[1] for p, v in before.items()}
