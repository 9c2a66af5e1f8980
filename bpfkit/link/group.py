# SPDX-License-Identifier: Apache-2.0
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

from .._protocols import ProgramArg
from ..errors import BPFKitError, KernelError, NotFoundError, UsageError
from .base import GroupInfo, Link, LinkInfo, load_pinned_link
from .perf_event import PerfEventIoctlLink, PerfEventLink

__all__ = ["LinkGroup", "attach_many", "close_links", "DEFAULT_CLOSE_WORKERS"]

T = TypeVar("T")
L = TypeVar("L", bound=Link)


class _Closable(Protocol):
    """What close_links closes: links, and the fds and perf events they are made of."""

    def close(self) -> None: ...

# Threads closing links at once. Closing a perf-event probe has two slow parts (Linux 6.18,
# measured on this 2-CPU host with a VM keeping it busy, uprobes on distinct libc functions):
# * releasing its bpf_link: perf_event_detach_bpf_prog waits for an RCU Tasks Trace grace
#   period, outside any global lock, so those waits overlap: 200 links in 0.24 s from 32
#   threads, 0.93 s from 8, about 30 ms each one by one;
# * destroying the perf event: perf_uprobe_destroy unregisters the probe and waits for grace
#   periods (uprobe_unregister_sync, tracepoint_synchronize_unregister) holding the
#   kernel-wide event_mutex, about 80 ms each whatever the thread count.
# Interleaving the two makes each destroy wait for a grace period already under way plus its
# own: 200 links 22.7 s closed whole from 8 threads (113 ms a link), 21.9 s one by one,
# 16-17 s when every bpf_link is released first (in a pool) and the perf events are destroyed
# after, one at a time. benchmarks/bench_attach.py, 1,000 links: 89.4 s and 78.8 s in two
# runs, against libbpf's one-by-one bpf_link__destroy 107.4 s and 106.7 s in the same runs.
# SET_BPF (ioctl) perf events have no bpf_link to release apart, so their fd closes go to the
# pool whole: 275 uprobes 30.9/30.6 s from 32 threads against 35.6/32.2 s one by one
# (bench_attach.py --ioctl-only, load 14-20): only the detach's wait overlaps.
DEFAULT_CLOSE_WORKERS = 32

# Below this many links one thread closes them (a pool costs more than it saves).
_SEQUENTIAL_BELOW = 2


def _close_one(link: _Closable) -> BaseException | None:
    try:
        link.close()
    except Exception as exc:
        return exc
    return None


def _pooled_part(link: _Closable) -> _Closable | None:
    """What of ``link`` to close in the pool: a perf-event link's bpf_link only (its perf
    event comes after, see DEFAULT_CLOSE_WORKERS), nothing of a SET_BPF perf event (its close
    is the destroy), any other link whole (its release may wait for a grace period too)."""
    if isinstance(link, PerfEventLink):
        return link.fd
    if isinstance(link, PerfEventIoctlLink):
        # No bpf_link to release apart: closing the perf event fd detaches the program
        # (perf_event_free_bpf_prog, whose grace period overlaps across threads) and destroys
        # the event. Its tracefs probe, if any, is removed after, in order.
        return link.fd if link.perf_event is not None else None
    return link


def close_links(links: Iterable[_Closable], workers: int | None = None) -> list[BaseException]:
    """Close every link in ``links`` (``workers`` threads for the parts that overlap,
    default DEFAULT_CLOSE_WORKERS; ``workers=1`` closes each whole, one after the other).

    Perf-event links close in two rounds: their bpf_links (and every other kind of link)
    concurrently, then their perf events and tracefs probes one at a time, in order. Every
    link is tried even when some fail. Raises the first failure (in the order of ``links``)
    once all are tried; the exception's ``errors`` attribute lists every failure. Returns the
    (empty) list of failures when all closed. Links already closed are skipped.
    """
    todo = [lk for lk in links if not getattr(lk, "closed", False)]
    if workers is None:
        workers = DEFAULT_CLOSE_WORKERS
    if workers < 1:
        raise UsageError(f"close_links: workers must be at least 1, not {workers}")
    results: list[BaseException | None]
    if workers == 1 or len(todo) < _SEQUENTIAL_BELOW:
        results = [_close_one(lk) for lk in todo]
    else:
        parts = [_pooled_part(lk) for lk in todo]
        pooled = [i for i, part in enumerate(parts) if part is not None]
        results = [None] * len(todo)
        if pooled:
            with ThreadPoolExecutor(max_workers=min(workers, len(pooled)), thread_name_prefix="bpfkit-close") as pool:
                def close_part(i: int) -> BaseException | None:
                    part = parts[i]
                    assert part is not None  # pooled holds the indexes of the parts that are not None
                    return _close_one(part)

                for i, err in zip(pooled, pool.map(close_part, pooled)):
                    results[i] = err
        for i, lk in enumerate(todo):
            if parts[i] is not lk:  # the rest of a perf-event link, even if its bpf_link failed
                err = _close_one(lk)
                results[i] = results[i] or err
    errors = [exc for exc in results if exc is not None]
    if errors:
        first = errors[0]
        if len(errors) > 1:
            first.add_note(f"{len(errors) - 1} more of {len(todo)} links failed to close (see .errors)")
        first.errors = errors  # type: ignore[attr-defined]
        raise first
    return errors


class LinkGroup(Link):
    """An ordered set of links that is itself a Link.

    ``close()`` closes every member concurrently; ``pin(dir)`` pins member *i* at ``dir/i``;
    ``update(prog)`` and ``detach()`` apply to all; ``info()`` is the list of the members'
    LinkInfo (``info(0)`` the first's). A link is a member at most once.
    """

    kind = "group"

    def __init__(self, links: Iterable[Link] = (), *, workers: int | None = None) -> None:
        self._links: list[Link] = []
        self._ids: set[int] = set()
        self._pinned_dir: str | None = None
        self._made_dir = False
        self.workers = workers
        for lk in links:
            self.add(lk)

    # -- set
    def add(self, link: L) -> L:
        """Add ``link`` (ignored if already a member); returns it."""
        if id(link) not in self._ids:
            self._ids.add(id(link))
            self._links.append(link)
        return link

    def __len__(self) -> int:
        return len(self._links)

    def __iter__(self) -> Iterator[Link]:
        return iter(list(self._links))

    def __getitem__(self, index: int) -> Link:
        return self._links[index]

    def __contains__(self, link: object) -> bool:
        return id(link) in self._ids

    @property
    def links(self) -> tuple[Link, ...]:
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
        from .._kernel.bpffs import check_pin_dir, make_dirs, remove_dirs

        made_dirs: list[str] = []
        if not os.path.isdir(path):
            check_pin_dir(path, "link group pin directory")  # on bpffs, before creating anything
            try:
                make_dirs(path, made_dirs)
            except OSError as exc:
                raise KernelError(f"pin link group: mkdir {exc.filename or path}", exc.errno or errno.EIO) from None
        made = bool(made_dirs)
        done: list[Link] = []
        try:
            for i, lk in enumerate(self._links):
                lk.pin(os.path.join(path, str(i)))
                done.append(lk)
        except BaseException as exc:
            for lk in done:
                try:
                    lk.unpin()
                except Exception:
                    pass
            remove_dirs(made_dirs)
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
            except Exception as exc:
                errors.append(exc)
        if self._pinned_dir and self._made_dir:
            _rmdir(self._pinned_dir)
        self._pinned_dir, self._made_dir = None, False
        if errors:
            raise errors[0]

    def update(self, prog: ProgramArg) -> None:
        """Replace the program of every member (BPF_LINK_UPDATE)."""
        for lk in self._links:
            lk.update(prog)

    def detach(self) -> None:
        """Detach every member (BPF_LINK_DETACH); they still need closing."""
        for lk in self._links:
            lk.detach()

    def info(self, index: int | None = None) -> LinkInfo:
        """The members' LinkInfo as one :class:`~bpfkit.link.base.GroupInfo` (a sequence of
        them, in order), or member ``index``'s alone."""
        if index is not None:
            return self._links[index].info()
        return GroupInfo.of([lk.info() for lk in self._links])

    @classmethod
    def load_pinned(cls, path: str) -> LinkGroup:
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
    attach_one: Callable[[T], Link],
    *,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
    skip: Callable[[T, BPFKitError], bool] | None = None,
) -> LinkGroup:
    """``attach_one(target)`` for every target, collected in a LinkGroup.

    ``progress(done, total)`` is called after each attach. All or nothing: when one attach
    fails (or the caller interrupts), the links made so far are closed (concurrently) and the
    error is re-raised, naming the target; unless ``skip(target, error)`` says True: then that
    target is left out and the others go on. ``workers`` is the group's close concurrency.
    """
    items: Sequence[T] = targets if isinstance(targets, (list, tuple)) else list(targets)
    total = len(items)
    group = LinkGroup(workers=workers)
    done = 0
    try:
        for target in items:
            try:
                group.add(attach_one(target))
            except BPFKitError as exc:
                if skip is None or not skip(target, exc):
                    raise
            done += 1
            if progress is not None:
                progress(done, total)
    except BaseException as exc:
        try:
            group.close()
        except Exception as cleanup:
            exc.add_note(f"also failed to close links made before: {cleanup}")
        if isinstance(exc, BPFKitError):
            raise exc.wrap(f"attach {target!r} ({done + 1} of {total})")
        raise
    return group
