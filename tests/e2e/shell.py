"""A command started as from a shell: Ctrl-C and SIGTERM reach it with their default meaning.

A child inherits an ignored signal and a blocked signal mask from the process that starts it, and
a test run is a long process: a library loaded in it (native code sets dispositions without Python
knowing) may have set SIGINT to ignored by the time an end-to-end test sends Ctrl-C. A terminal's
shell starts a command with both default, so the tests that interrupt a command start it that way.
"""

from __future__ import annotations

import signal

_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def as_from_a_shell() -> None:
    """``preexec_fn`` for ``subprocess.Popen``: SIGINT and SIGTERM unblocked and at their defaults."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    for sig in _SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
