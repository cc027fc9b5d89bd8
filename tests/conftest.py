"""Settings for the whole test run."""

from __future__ import annotations

import signal

# A test run started with SIGINT ignored (a script's background job: ``bash .ci/run &``)
# would pass that on to every sif it starts, and sif keeps an inherited SIG_IGN (a Ctrl-C
# meant for the foreground job leaves it running): the Ctrl-C tests would wait for runs
# that never stop. They press Ctrl-C themselves, so the run takes it as a foreground
# process does; the test that needs it ignored ignores it in its child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
