"""StopSignals: the CLI's SIGINT/SIGTERM wait, which must never deadlock or lose a signal.

Real signals to this process; no root needed."""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import pytest

from bpfkit.cli.stop_signals import StopSignals


def open_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


def test_a_signal_before_the_wait_is_not_lost() -> None:
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next bytecode
        started = time.monotonic()
        assert stop.wait(timeout=30)
        assert time.monotonic() - started < 5
        assert stop.signum == signal.SIGTERM


def test_wait_times_out_without_a_signal() -> None:
    with StopSignals() as stop:
        started = time.monotonic()
        assert stop.wait(timeout=0.2) is False
        assert 0.15 < time.monotonic() - started < 5
        assert not stop.is_set() and stop.signum == 0


def test_a_signal_from_another_thread_wakes_the_wait() -> None:
    with StopSignals() as stop:
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
        assert stop.wait(timeout=30)
        assert stop.signum == signal.SIGINT


def test_first_signal_is_kept_and_repeats_do_not_block() -> None:
    with StopSignals() as stop:
        for _ in range(100_000 // 1000):  # more bytes than a pipe holds would block a naive write
            for _ in range(1000):
                stop._handler(signal.SIGINT, None)
        stop._handler(signal.SIGTERM, None)
        assert stop.signum == signal.SIGINT and stop.wait(timeout=1)


def test_previous_handlers_come_back_and_the_pipe_is_closed() -> None:
    before = open_fds()
    prev_int, prev_term = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with StopSignals():
        assert signal.getsignal(signal.SIGINT) is not prev_int
    assert signal.getsignal(signal.SIGINT) is prev_int
    assert signal.getsignal(signal.SIGTERM) is prev_term
    assert open_fds() == before


def test_signals_at_random_moments_always_end_the_wait() -> None:
    # The deadlock this class replaces (Event.set() in a handler that interrupted
    # Event.wait() while it held its lock) needs the signal inside a few bytecodes: many
    # tries at random offsets around the start of the wait.
    def fire(delay: float) -> None:
        end = time.perf_counter() + delay
        while time.perf_counter() < end:
            pass
        os.kill(os.getpid(), signal.SIGINT)

    for _ in range(500):
        with StopSignals() as stop:
            thread = threading.Thread(target=fire, args=(random.random() * 2e-4,))
            thread.start()
            assert stop.wait(timeout=30), "a SIGINT was lost"
            thread.join()


@pytest.fixture(autouse=True)
def _keep_default_handlers():
    # A failure in a test above must not leave a handler that swallows Ctrl-C of the run.
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGINT, saved[0])
    signal.signal(signal.SIGTERM, saved[1])
