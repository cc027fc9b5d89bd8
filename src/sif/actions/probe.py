"""Which target directories of a reflink plan can share extents: each probed once."""

from __future__ import annotations

import os

from sif.actions import fsops
from sif.actions.plan import Plan
from sif.events import display_path


def probe_reflink(plan: Plan) -> list[str]:
    """Probe each target directory once (``FIDEDUPERANGE`` of 0 bytes); drop its steps if it cannot.

    Returns one message per directory whose file system cannot share extents.
    """
    from sif.fileio import open_regular

    verdict: dict[str, str | None] = {}
    for s in plan.active:
        d = os.path.dirname(s.drop.path)
        if d in verdict:
            continue
        try:
            fd, _ = open_regular(s.drop.path, follow_symlinks=False)
        except OSError:
            continue  # the step's own re-check names it
        try:
            fsops.probe_dedupe(fd)
            verdict[d] = None
        except OSError as exc:
            if exc.errno in fsops.NO_REFLINK_ERRNOS:
                verdict[d] = exc.strerror or str(exc)
        finally:
            os.close(fd)
    messages = []
    for d, why in verdict.items():
        if why is not None:
            n = sum(1 for s in plan.active if os.path.dirname(s.drop.path) == d)
            messages.append(
                f"{display_path(d)}: this file system cannot share extents "
                f"(FIDEDUPERANGE: {why}): {n} file(s) left as they are"
            )
    bad = {d for d, why in verdict.items() if why is not None}
    plan.steps = [s for s in plan.steps if os.path.dirname(s.drop.path) not in bad]
    plan.refused.extend(messages)
    return messages
