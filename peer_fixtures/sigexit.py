"""Exit on SIGTERM without the select race (stdlib only: fake peers import it as children).

A Python-level handler only runs between bytecodes. A peer that blocks in ``select()``/
``epoll_wait`` with no timeout loses a SIGTERM that lands after the interpreter's last signal
check and before the syscall: the C handler records it, the syscall is not interrupted, and the
Python handler waits for a wake-up that never comes (seen as a 1-in-80 hang of
``test_stdio_sigterm_behaviour[exit-0]``). Here SIGTERM is blocked in every thread and taken by
``sigwait`` in a daemon thread, so it is acted on whatever the main thread is doing.
"""

from __future__ import annotations

import os
import signal
import threading


def exit_on_sigterm(code: int = 0) -> None:
    """From now on SIGTERM ends this process with ``code`` at once (``os._exit``: no cleanup).

    Call it before starting other threads: the signal mask is per thread and inherited, and the
    signal must stay blocked everywhere but in ``sigwait``.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def wait() -> None:
        signal.sigwait({signal.SIGTERM})
        os._exit(code)

    threading.Thread(target=wait, name="sigterm-exit", daemon=True).start()
