"""Many links at once: LinkGroup, attach_many, close_links.

Closing a perf-event probe is slow on recent kernels: releasing the bpf_link waits for an
RCU grace period (perf_event_detach_bpf_prog), and destroying a k/uprobe perf event
unregisters the probe and waits for more (tracepoint_synchronize_unregister, the uprobe
unregister sync), about 0.1 s a probe on Linux 6.18; closing 1,000 one after the other takes
minutes with idle CPUs. :func:`close_links` and :meth:`LinkGroup.close` close from several
threads (``close(2)`` releases the GIL) so that the waits overlap where the kernel lets them
(see DEFAULT_CLOSE_WORKERS). Where the kernel has them (6.6+), one uprobe_multi link
(bpfkit.link.multi) for all targets is far faster to make and to close.

    from bpfkit import link

    exe = link.Executable("libc")
    group = link.attach_many(symbols, lambda sym: exe.uprobe(sym, prog),
                             progress=lambda done, total: print(f"{done}/{total}", end="\\r"))
    ...
    group.close()                 # concurrently; the first error is raised after all are tried
"""

from __future__ import annotations

import errno
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from ..errors import BPFKitError, KernelError, NotFoundError, UsageError
from .base import LinkInfo, load_pinned_link
from .perf_event import PerfEventLink

__all__ = ["LinkGroup", "attach_many", "close_links", "DEFAULT_CLOSE_WORKERS"]

T = TypeVar("T")

# Threads closing links at once. Measured on the 2-CPU test host (Linux 6.18), perf-event
# uprobe links (uprobe PMU + bpf_link each), split into their two parts:
#   150 links, load 13-18: bpf_links 4.7 s one by one, 0.5 s from 8 threads; perf events
#     12.4 s from one thread, 14.8 s from 8 (only contention).
#   60 links, load 3: bpf_links 2.0 s vs 0.3 s; perf events 5.3 s either way.
# The bpf_link releases (perf_event_detach_bpf_prog's grace period) overlap; destroying a
# uprobe perf event (perf_uprobe_destroy) unregisters it and waits for grace periods while
# holding the kernel-wide event_mutex, so those queue up whatever the thread count (about
# 90 ms each). Whole closes, this module's way (bpf_links in the pool, perf events in one
# thread behind them): 60 links 5.2-5.4 s vs 6.6 s one by one (load 3); 150 links 13.8-14.8
# vs 16.7-17.6 s (load 18); but 300 links 32.7 vs 32.3 s and 1,000 links 99.6 vs 114.6 s
# (load 13) or 120.6 vs 118.9 s (load 3): with many links the kernel's grace-period
# machinery itself appears to be the limit. 4 threads already get what there is to get.
DEFAULT_CLOSE_WORKERS = 8

# Below this many links one thread closes them (a pool costs more than it saves).
_SEQUENTIAL_BELOW = 2


def _close_one(link: Any) -> BaseException | None:
    try:
        link.close()
    except Exception as exc:  # noqa: BLE001 - collected and re-raised by the caller
        return exc
    return None


def close_links(links: Iterable[Any], workers: int | None = None) -> list[BaseException]:
    """Close every link in ``links``, ``workers`` at a time (default DEFAULT_CLOSE_WORKERS).

    Every link is tried even when some fail. Raises the first failure (in the order of
    ``links``) once all are tried; the exception's ``errors`` attribute lists every failure.
    Returns the (empty) list of failures when all closed. Links already closed are skipped.
    """
    todo = [lk for lk in links if not getattr(lk, "closed", False)]
    if workers is None:
        workers = DEFAULT_CLOSE_WORKERS
    if workers < 1:
        raise UsageError(f"close_links: workers must be at least 1, not {workers}")
    workers = min(workers, len(todo))
    results: list[BaseException | None]
    if workers <= 1 or len(todo) < _SEQUENTIAL_BELOW:
        results = [_close_one(lk) for lk in todo]
    else:
        results = [None] * len(todo)
        lock = threading.Lock()
        position = iter(range(len(todo)))
        # Perf-event links close in two steps: their bpf_links in the pool (those releases
        # wait for grace periods that overlap), their perf events one at a time in one thread
        # behind them (the kernel destroys k/uprobe perf events under event_mutex: more
        # threads only queue on it).
        serial: queue.SimpleQueue[int] = queue.SimpleQueue()
        # The bpf_links run at most this many ahead of the perf events: closing all of them
        # at once piles up RCU callbacks that then slow every perf event's grace periods
        # (1,000 uprobes: no gain at all over closing one by one).
        ahead = threading.BoundedSemaphore(2 * workers)

        def drain() -> None:
            # Each worker takes the next link until none are left: fewer futures than links.
            while True:
                with lock:
                    i = next(position, -1)
                if i < 0:
                    return
                lk = todo[i]
                if isinstance(lk, PerfEventLink):
                    ahead.acquire()
                    results[i] = _close_one(lk.fd)
                    serial.put(i)
                else:
                    results[i] = _close_one(lk)

        def drain_serial() -> None:
            while (i := serial.get()) >= 0:
                err = _close_one(todo[i])
                results[i] = results[i] or err
                ahead.release()

        with ThreadPoolExecutor(max_workers=workers + 1, thread_name_prefix="bpfkit-close") as pool:
            last = pool.submit(drain_serial)
            try:
                for fut in [pool.submit(drain) for _ in range(workers)]:
                    fut.result()
            finally:
                serial.put(-1)
                last.result()
    errors = [exc for exc in results if exc is not None]
    if errors:
        first = errors[0]
        if len(errors) > 1:
            first.add_note(f"{len(errors) - 1} more of {len(todo)} links failed to close (see .errors)")
        first.errors = errors  # type: ignore[attr-defined]
        raise first
    return errors


class LinkGroup:
    """An ordered set of links that is itself a Link.

    ``close()`` closes every member concurrently; ``pin(dir)`` pins member *i* at ``dir/i``;
    ``update(prog)`` and ``detach()`` apply to all; ``info()`` is the list of the members'
    LinkInfo (``info(0)`` the first's). A link is a member at most once.
    """

    kind = "group"

    def __init__(self, links: Iterable[Any] = (), *, workers: int | None = None) -> None:
        self._links: list[Any] = []
        self._ids: set[int] = set()
        self._pinned_dir: str | None = None
        self._made_dir = False
        self.workers = workers
        for lk in links:
            self.add(lk)

    # -- set
    def add(self, link: Any) -> Any:
        """Add ``link`` (ignored if already a member); returns it."""
        if id(link) not in self._ids:
            self._ids.add(id(link))
            self._links.append(link)
        return link

    def __len__(self) -> int:
        return len(self._links)

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._links))

    def __getitem__(self, index: int) -> Any:
        return self._links[index]

    def __contains__(self, link: object) -> bool:
        return id(link) in self._ids

    @property
    def links(self) -> tuple[Any, ...]:
        return tuple(self._links)

    # -- Link protocol
    @property
    def closed(self) -> bool:
        """True when every member is closed (an empty group counts as closed)."""
        return all(getattr(lk, "closed", False) for lk in self._links)

    @property
    def pinned_path(self) -> str | None:
        """The directory the members are pinned under, or None."""
        return self._pinned_dir

    def close(self, workers: int | None = None) -> None:
        """Close every member concurrently (see :func:`close_links`); idempotent."""
        close_links(reversed(self._links), self.workers if workers is None else workers)

    def pin(self, path: str) -> None:
        """Pin member *i* at ``path/i`` in bpffs (making the directory if missing). All or
        nothing: when one cannot be pinned, the pins made by this call are removed."""
        if self._pinned_dir == path:
            return
        made = False
        if not os.path.isdir(path):
            try:
                os.mkdir(path)
            except OSError as exc:
                raise KernelError(f"pin link group: mkdir {path}", exc.errno or errno.EIO) from None
            made = True
        done: list[Any] = []
        try:
            for i, lk in enumerate(self._links):
                lk.pin(os.path.join(path, str(i)))
                done.append(lk)
        except BaseException as exc:
            for lk in done:
                try:
                    lk.unpin()
                except Exception:  # noqa: BLE001 - keep undoing, the first error matters
                    pass
            if made:
                _rmdir(path)
            if isinstance(exc, BPFKitError):
                raise exc.wrap(f"pin link group ({len(self._links)} links) at {path}")
            raise
        if self._pinned_dir and self._made_dir:
            _rmdir(self._pinned_dir)  # the members moved out of the previous directory
        self._pinned_dir, self._made_dir = path, made

    def unpin(self) -> None:
        """Remove every member's pin, and the directory if :meth:`pin` made it."""
        errors = []
        for lk in self._links:
            try:
                lk.unpin()
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)
        if self._pinned_dir and self._made_dir:
            _rmdir(self._pinned_dir)
        self._pinned_dir, self._made_dir = None, False
        if errors:
            raise errors[0]

    def update(self, prog: Any) -> None:
        """Replace the program of every member (BPF_LINK_UPDATE)."""
        for lk in self._links:
            lk.update(prog)

    def detach(self) -> None:
        """Detach every member (BPF_LINK_DETACH); they still need closing."""
        for lk in self._links:
            lk.detach()

    def info(self, index: int | None = None) -> list[LinkInfo] | LinkInfo:
        """The members' LinkInfo in order, or member ``index``'s alone."""
        if index is not None:
            return self._links[index].info()
        return [lk.info() for lk in self._links]

    @classmethod
    def load_pinned(cls, path: str) -> "LinkGroup":
        """The links pinned under directory ``path`` (by :meth:`pin`), in member order;
        closing the result leaves the pins in place."""
        try:
            names = sorted((n for n in os.listdir(path) if n.isdigit()), key=int)
        except FileNotFoundError:
            raise NotFoundError(f"no pinned link group at {path}") from None
        group = cls()
        try:
            for name in names:
                group.add(load_pinned_link(os.path.join(path, name)))
        except BaseException:
            close_links(group._links)
            raise
        group._pinned_dir = path
        return group

    def __enter__(self) -> "LinkGroup":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        pinned = f", pinned under {self._pinned_dir}" if self._pinned_dir else ""
        return f"LinkGroup({len(self._links)} links{pinned})"


def _rmdir(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


def attach_many(
    targets: Iterable[T],
    attach_one: Callable[[T], Any],
    *,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
) -> LinkGroup:
    """``attach_one(target)`` for every target, collected in a LinkGroup.

    ``progress(done, total)`` is called after each attach. All or nothing: when one attach
    fails (or the caller interrupts), the links made so far are closed (concurrently) and the
    error is re-raised, naming the target. ``workers`` is the group's close concurrency.
    """
    items: Sequence[T] = targets if isinstance(targets, (list, tuple)) else list(targets)
    total = len(items)
    group = LinkGroup(workers=workers)
    done = 0
    try:
        for target in items:
            group.add(attach_one(target))
            done += 1
            if progress is not None:
                progress(done, total)
    except BaseException as exc:
        try:
            group.close()
        except Exception as cleanup:  # noqa: BLE001 - the attach error is the one to report
            exc.add_note(f"also failed to close links made before: {cleanup}")
        if isinstance(exc, BPFKitError):
            raise exc.wrap(f"attach {target!r} ({done + 1} of {total})")
        raise
    return group
