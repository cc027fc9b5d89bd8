"""The plan: which copy of each group is kept, and one typed step per name to act on.

A **keep policy** ranks the plain files (inodes) of a group; the best one is
the kept copy, the one the others become links to:

- ``first-root``: the file under the earliest root given to ``dupes``
  (rdfind's rule);
- ``newest`` / ``oldest``: by modification time;
- ``shortest-path`` / ``longest-path``: by the length of the file's name;

rules given together break ties in order, and the path (sorted) breaks the
last tie, so a plan is deterministic. ``keep_paths`` globs are never dropped;
with ``only_paths`` globs, only matching files may be dropped; ``rf_over`` is
how many copies stay (default 1). Whatever the policy, at least one copy of
every group stays, and a group whose every file is protected is left alone.
A glob with ``/`` matches the whole path, any other glob the name.

Archive members (``Replica.archive`` set) are never acted on, nor kept as the
copy others link to. A file that symbolic links name (met with ``sif dupes
-L``) is never dropped: the links would dangle.

Each **step** acts on one name of a dropped file: a file with hardlinks
gives one step per name, since the space comes back only when every name is
gone. Names that already are hard links of the kept copy (and, for
``reflink``, files whose extents are already shared) are **no-op** steps,
shown in the plan and never run.
"""

from __future__ import annotations

import fnmatch
import os
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sif.errors import ConfigError
from sif.events import display_path, needs_quoting
from sif.exact import Group, Replica

ACTIONS = ("link", "symlink", "reflink", "remove", "trash", "move")
KEEP_RULES = ("first-root", "newest", "oldest", "shortest-path", "longest-path")


@dataclass(frozen=True)
class KeepPolicy:
    """Which copies survive: ranking ``rules``, protected globs, copies to keep."""

    rules: tuple[str, ...] = ("first-root",)
    keep_paths: tuple[str, ...] = ()
    only_paths: tuple[str, ...] = ()
    rf_over: int = 1

    def __post_init__(self) -> None:
        for rule in self.rules:
            if rule not in KEEP_RULES:
                raise ConfigError(f"unknown keep rule {rule!r} (one of {', '.join(KEEP_RULES)})")
        if self.rf_over < 1:
            raise ConfigError("--rf-over must be at least 1: one copy always stays")


@dataclass(frozen=True)
class FileRef:
    """One name of a file, with the identity the report recorded for it."""

    path: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @property
    def key(self) -> tuple[int, int]:
        return (self.dev, self.ino)


@dataclass(frozen=True)
class Step:
    """One action on one name: make ``drop`` a link to ``keep``, or remove/move it.

    ``target`` is the symlink's text (``symlink``) or the destination
    (``move``). ``noop`` says why nothing needs doing, when nothing does.
    """

    index: int
    action: str
    group: int
    digest: str
    keep: FileRef
    drop: FileRef
    target: str | None = None
    noop: str | None = None

    def to_dict(self) -> dict[str, Any]:
        k, d = self.keep, self.drop
        return {
            "index": self.index,
            "action": self.action,
            "group": self.group,
            "digest": self.digest,
            "keep": {
                "path": k.path,
                "dev": k.dev,
                "ino": k.ino,
                "size": k.size,
                "mtime_ns": k.mtime_ns,
                "ctime_ns": k.ctime_ns,
            },
            "drop": {
                "path": d.path,
                "dev": d.dev,
                "ino": d.ino,
                "size": d.size,
                "mtime_ns": d.mtime_ns,
                "ctime_ns": d.ctime_ns,
            },
            "target": self.target,
            "noop": self.noop,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        return cls(
            index=d["index"],
            action=d["action"],
            group=d["group"],
            digest=d["digest"],
            keep=FileRef(**d["keep"]),
            drop=FileRef(**d["drop"]),
            target=d.get("target"),
            noop=d.get("noop"),
        )

    def shell(self) -> str:
        """The step as a shell command a person can read (``#`` for no-ops and reflinks)."""
        k, d = _sh(self.keep.path), _sh(self.drop.path)
        if self.noop:
            return f"# no-op: {d}: {self.noop}"
        if self.action == "link":
            return f"ln -f -- {k} {d}"
        if self.action == "symlink":
            return f"ln -sfn -- {_sh(self.target or '')} {d}"
        if self.action == "reflink":
            return f"# dedupe (share extents, FIDEDUPERANGE): {d} with {k}"
        if self.action == "remove":
            return f"rm -- {d}  # same as {k}"
        if self.action == "trash":
            return f"gio trash -- {d}  # same as {k}"
        dest = self.target or ""
        return f"mkdir -p -- {_sh(os.path.dirname(dest))} && mv -n -- {d} {_sh(dest)}"


def _sh(path: str) -> str:
    return display_path(path) if needs_quoting(path) else shlex.quote(path)


@dataclass
class Plan:
    """Every step of one command, built before anything is touched."""

    action: str
    policy: KeepPolicy
    steps: list[Step] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """One message per file the plan will not act on, naming the group and why."""
    left_alone: int = 0
    """Groups with nothing to do (every file protected, or archive members only)."""
    source: dict[str, Any] = field(default_factory=dict)
    """The report's header (empty for groups handed in directly)."""

    @property
    def active(self) -> list[Step]:
        return [s for s in self.steps if s.noop is None]

    @property
    def noops(self) -> list[Step]:
        return [s for s in self.steps if s.noop is not None]


def _matches(path: str, globs: Iterable[str]) -> bool:
    name = os.path.basename(path)
    return any(fnmatch.fnmatchcase(path if "/" in g else name, g) for g in globs)


def _root_index(path: str, roots: list[str]) -> int:
    for i, root in enumerate(roots):
        root = root.rstrip("/") or "/"
        if path == root or path.startswith(root if root == "/" else root + "/"):
            return i
    return len(roots)


class _Roots:
    """:func:`_root_index` with each root's forms made once (a plan asks for every file)."""

    def __init__(self, roots: list[str]) -> None:
        self.forms = []
        for root in roots:
            root = root.rstrip("/") or "/"
            self.forms.append((root, root if root == "/" else root + "/"))

    def index(self, path: str) -> int:
        for i, (root, prefix) in enumerate(self.forms):
            if path.startswith(prefix) or path == root:
                return i
        return len(self.forms)

    def first(self, paths: tuple[str, ...]) -> int:
        """The earliest root any of ``paths`` is under."""
        if len(paths) == 1:
            return self.index(paths[0])
        return min(map(self.index, paths))


def rank(
    replicas: Iterable[Replica], policy: KeepPolicy, roots: list[str] | _Roots
) -> list[Replica]:
    """The replicas best first under ``policy`` (the path breaks the last tie)."""
    return sorted(replicas, key=rank_key(policy, roots))


def rank_key(policy: KeepPolicy, roots: list[str] | _Roots) -> Callable[[Replica], Any]:
    """The sort key of :func:`rank` (made once for a whole plan)."""
    under = roots if isinstance(roots, _Roots) else _Roots(roots)
    if policy.rules == ("first-root",):  # the default
        return lambda r: (under.first(r.paths), r.paths[0])

    def key(r: Replica) -> tuple[Any, ...]:
        parts: list[Any] = []
        for rule in policy.rules:
            if rule == "first-root":
                parts.append(under.first(r.paths))
            elif rule == "newest":
                parts.append(-r.mtime_ns)
            elif rule == "oldest":
                parts.append(r.mtime_ns)
            elif rule == "shortest-path":
                parts.append(len(r.path))
            else:
                parts.append(-len(r.path))
        parts.append(r.path)
        return tuple(parts)

    return key


def _protected(r: Replica, policy: KeepPolicy) -> bool:
    if r.symlinks:  # symbolic links name it (sif dupes -L): dropping it would leave them dangling
        return True
    if policy.keep_paths and any(_matches(p, policy.keep_paths) for p in r.paths):
        return True
    return bool(policy.only_paths) and not all(_matches(p, policy.only_paths) for p in r.paths)


def _ref(r: Replica, path: str, size: int) -> FileRef:
    return FileRef(path, r.dev, r.ino, size, r.mtime_ns, r.ctime_ns)


def _move_target(path: str, to: str, roots: list[str]) -> str:
    i = _root_index(path, roots)
    if i < len(roots):
        root = roots[i].rstrip("/") or "/"
        rel = os.path.relpath(path, root) if path != root else os.path.basename(path)
    else:
        rel = path.lstrip("/")
    return os.path.join(to, rel)


def _symlink_text(keep: str, drop: str, absolute: bool) -> str:
    if absolute:
        return os.path.realpath(keep)
    return os.path.relpath(os.path.realpath(keep), os.path.realpath(os.path.dirname(drop)))


def plan_actions(
    groups: Iterable[Group] | Any,
    action: str = "link",
    keep: KeepPolicy | str | Iterable[str] = "first-root",
    *,
    roots: Iterable[str] | None = None,
    to: str | None = None,
    absolute: bool = False,
) -> Plan:
    """The whole plan of ``action`` over ``groups`` (or a :class:`Report`), touching nothing.

    ``action`` is one of :data:`ACTIONS`; ``keep`` a :class:`KeepPolicy` or
    rule names; ``roots`` rank ``first-root`` (a report brings its own);
    ``to`` is the directory of ``move``; ``absolute`` makes symlinks absolute.
    Only ``reflink`` reads anything: the extent maps, to find no-ops.
    """
    from sif.actions.report import Report

    if action not in ACTIONS:
        raise ConfigError(f"unknown action {action!r} (one of {', '.join(ACTIONS)})")
    if isinstance(keep, str):
        keep = KeepPolicy(rules=(keep,))
    elif not isinstance(keep, KeepPolicy):
        keep = KeepPolicy(rules=tuple(keep))
    if (action == "move") != (to is not None):
        raise ConfigError("a move needs a destination directory (--to), and only a move takes one")
    source: dict[str, Any] = {}
    if isinstance(groups, Report):
        source = groups.header
        roots = roots if roots is not None else groups.roots
        groups = groups.groups
    root_list = [os.path.abspath(r) for r in (roots or ())]
    to_dir = os.path.abspath(to) if to is not None else None
    to_dev = None
    if to_dir is not None:
        existing = to_dir
        while not os.path.isdir(existing):  # the device it will be made on
            existing = os.path.dirname(existing)
        to_dev = os.stat(existing).st_dev
    plan = Plan(action, keep, source=source)
    destinations: set[str] = set()
    key = rank_key(keep, _Roots(root_list))
    for gi, g in enumerate(groups, 1):
        plain = [r for r in g.replicas if r.archive is None]
        twice = _listed_twice(plain)
        if twice is not None:  # one file as two replicas: its "redundant copy" is itself
            plan.refused.append(
                f"group {gi} ({g.digest}): {display_path(twice[0].path)} and "
                f"{display_path(twice[1].path)} are one file (the same device and inode), "
                "listed twice: nothing done in the group"
            )
            continue
        ranked = sorted(plain, key=key)
        protected = [r for r in ranked if _protected(r, keep)]
        kept = set(map(id, protected))
        for r in ranked:
            if len(kept) >= keep.rf_over:
                break
            kept.add(id(r))
        drops = [r for r in ranked if id(r) not in kept]
        if len(plain) < 2 or not drops:
            plan.left_alone += 1
            continue
        best = next(r for r in ranked if id(r) in kept)
        k = _ref(best, best.path, g.size)

        steps: list[tuple[FileRef, str | None, str | None]] = []
        if action == "link":
            steps += [
                (_ref(best, p, g.size), None, f"already a hard link of {display_path(best.path)}")
                for p in best.hardlinks
            ]
        for r in drops:
            if action in ("link", "reflink") and r.dev != best.dev:
                why = "a hard link" if action == "link" else "shared extents"
                hint = " (use --symlink)" if action == "link" else ""
                plan.refused.append(
                    f"{_what(gi, g, best)}: {display_path(r.path)} is on another file system: "
                    f"{why} cannot cross file systems{hint}"
                )
                continue
            for p in r.paths:
                d = _ref(r, p, g.size)
                target = None
                noop = None
                if action == "symlink":
                    target = _symlink_text(best.path, p, absolute)
                elif action == "move":
                    assert to_dir is not None
                    target = _move_target(p, to_dir, root_list)
                    if to_dev is not None and to_dev != r.dev:
                        plan.refused.append(
                            f"{_what(gi, g, best)}: {display_path(p)}: "
                            f"{display_path(to_dir)} is on another file system "
                            "(a move would be a copy): not moved"
                        )
                        continue
                    if os.path.lexists(target) or target in destinations:
                        plan.refused.append(
                            f"{_what(gi, g, best)}: {display_path(p)}: "
                            f"{display_path(target)} exists"
                            f"{'' if os.path.lexists(target) else ' in the plan'}: not moved"
                        )
                        continue
                    destinations.add(target)
                elif action == "reflink" and _shared(best.path, p):
                    noop = f"extents already shared with {display_path(best.path)}"
                steps.append((d, target, noop))
        for d, target, noop in steps:
            plan.steps.append(
                Step(len(plan.steps), action, gi, g.digest, k, d, target=target, noop=noop)
            )
    return plan


def _listed_twice(replicas: list[Replica]) -> tuple[Replica, Replica] | None:
    """Two replicas of ``replicas`` that are one file, if any: a report where one file
    is two entries (edited by hand, or made by a sif that listed ``d/f`` and
    ``/abs/d/f`` as two files) would have the action drop the only copy for itself."""
    first: dict[tuple[int, int], Replica] = {}
    for r in replicas:
        other = first.setdefault((r.dev, r.ino), r)
        if other is not r:
            return other, r
    return None


def _what(gi: int, g: Group, best: Replica) -> str:
    """The group a refusal names."""
    return f"group {gi} ({g.digest}, kept copy {display_path(best.path)})"


def _shared(a: str, b: str) -> bool:
    from sif.actions.fsops import extents_shared
    from sif.fileio import open_regular

    try:
        fa, _ = open_regular(a, follow_symlinks=False)
    except OSError:
        return False
    try:
        fb, _ = open_regular(b, follow_symlinks=False)
    except OSError:
        os.close(fa)
        return False
    try:
        return extents_shared(fa, fb)
    finally:
        os.close(fa)
        os.close(fb)
