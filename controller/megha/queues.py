"""User queues of a GM and the queue store that outlives it.

A GM serves one or more user queues, round-robin (seed 001 §IV-C). A task that fits nowhere
goes to the tail of its queue (§IV-B5). To avoid re-matching a task against a view that has
not changed since it last failed, failed tasks are *parked* and return to the tail of the
ready queue when the view changes in a way that could help (see GlobalMaster); the order
of service is the paper's.

The GM is stateless (§IV-D): its view comes back from LM updates. Accepted but not yet
placed tasks must not die with it, so they live in a :class:`QueueStore` — written before
Submit answers, cleared when an LM accepts the task. ``MemoryQueueStore`` is shared by the
GM objects of a model cell (it stands for a durable store); ``FileQueueStore`` is an
append-only journal on disk for cellbed-controller.
"""
from __future__ import annotations

import base64
import collections
import heapq
import json
import logging
import os
from typing import Callable, Iterator, Protocol

log = logging.getLogger(__name__)


class QueueStore(Protocol):
    def put(self, gm: str, name: str, blob: bytes) -> None:
        """Record (or overwrite) an accepted task of *gm*; durable once ``sync`` returns."""

    async def sync(self) -> None:
        """Wait until every put so far is durable (concurrent callers share one fsync)."""

    def remove(self, gm: str, name: str) -> None:
        """The task left the queue for good (an LM accepted it, or it was rejected)."""

    def load(self, gm: str) -> list[tuple[str, bytes]]:
        """Every task of *gm* still recorded, in acceptance order."""


class MemoryQueueStore:
    def __init__(self) -> None:
        self._d: dict[str, dict[str, bytes]] = {}
        self.writes = 0

    def put(self, gm: str, name: str, blob: bytes) -> None:
        self._d.setdefault(gm, {})[name] = blob
        self.writes += 1

    def remove(self, gm: str, name: str) -> None:
        self._d.get(gm, {}).pop(name, None)
        self.writes += 1

    def load(self, gm: str) -> list[tuple[str, bytes]]:
        return list(self._d.get(gm, {}).items())

    async def sync(self) -> None:
        return None


class FileQueueStore:
    """JSONL journal per GM: {"put": name, "task": base64} / {"del": name}; compacted when
    dead lines outnumber live ones. Every write is flushed to the OS at once; ``sync`` makes
    them durable with one fsync shared by all concurrent callers (group commit). A "del" need
    not be durable: a restarted GM asks the LMs about every task it finds (FindTasks)."""

    def __init__(self, directory: str, fsync: bool = True) -> None:
        self.dir = directory
        self.fsync = fsync
        os.makedirs(directory, exist_ok=True)
        self._live: dict[str, dict[str, bytes]] = {}
        self._lines: dict[str, int] = {}
        self._files: dict[str, object] = {}
        self._written = 0          # writes so far
        self._synced = 0           # writes known durable
        self._syncing = None       # the fsync in progress (a future)
        self.fsyncs = 0

    def _path(self, gm: str) -> str:
        return os.path.join(self.dir, f"{gm}.queue.jsonl")

    def _file(self, gm: str):
        f = self._files.get(gm)
        if f is None:
            if gm not in self._live:
                self.load(gm)
            f = self._files[gm] = open(self._path(gm), "a")
        return f

    def _write(self, gm: str, rec: dict) -> None:
        f = self._file(gm)
        f.write(json.dumps(rec) + "\n")
        f.flush()
        self._written += 1
        self._lines[gm] = self._lines.get(gm, 0) + 1
        if self._lines[gm] > 64 and self._lines[gm] > 2 * len(self._live[gm]) and self._syncing is None:
            self._compact(gm)

    async def sync(self) -> None:
        import asyncio
        if not self.fsync:
            return
        target = self._written
        while self._synced < target:
            if self._syncing is None:
                self._syncing = asyncio.ensure_future(self._fsync_all(self._written))
            await asyncio.shield(self._syncing)

    async def _fsync_all(self, upto: int) -> None:
        import asyncio
        fds = [f.fileno() for f in self._files.values()]
        try:
            await asyncio.get_running_loop().run_in_executor(None, lambda: [os.fsync(fd) for fd in fds])
            self.fsyncs += 1
            self._synced = max(self._synced, upto)
        finally:
            self._syncing = None

    def _compact(self, gm: str) -> None:
        path = self._path(gm)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            for name, blob in self._live[gm].items():
                f.write(json.dumps({"put": name, "task": base64.b64encode(blob).decode()}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        old = self._files.pop(gm, None)
        if old is not None:
            old.close()
        os.replace(tmp, path)
        self._lines[gm] = len(self._live[gm])
        self._synced = self._written       # everything live is in the fsynced new file

    def put(self, gm: str, name: str, blob: bytes) -> None:
        self._file(gm)
        self._live[gm][name] = blob
        self._write(gm, {"put": name, "task": base64.b64encode(blob).decode()})

    def remove(self, gm: str, name: str) -> None:
        self._file(gm)
        if self._live[gm].pop(name, None) is not None:
            self._write(gm, {"del": name})

    def load(self, gm: str) -> list[tuple[str, bytes]]:
        live: dict[str, bytes] = {}
        lines = 0
        try:
            with open(self._path(gm)) as f:
                for line in f:
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:
                        log.warning("%s: skipping a torn journal line", self._path(gm))
                        continue
                    lines += 1
                    if "put" in rec:
                        live[rec["put"]] = base64.b64decode(rec["task"])
                    elif "del" in rec:
                        live.pop(rec["del"], None)
        except FileNotFoundError:
            pass
        self._live[gm] = live
        self._lines[gm] = lines
        return list(live.items())

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


class UserQueues:
    """Ready and parked task names per user; round-robin across users. Within a user's ready
    queue, tasks are served in the order of their key (the ``task_order`` stage, T2: lower first),
    ties by entry: *key_of(user, name, seq)* is asked when a task enters the ready queue (arriving,
    or back from parked), *seq* counting every entry. The default key is *seq* itself: a plain FIFO
    queue. Parked tasks wait in entry order until unparked."""

    def __init__(self, users: list[str], key_of: Callable[[str, str, int], float] | None = None) -> None:
        self.users = list(users)
        self.ready: dict[str, list[tuple[float, int, str]]] = {u: [] for u in self.users}     # heaps
        self.parked: dict[str, collections.deque[str]] = {u: collections.deque() for u in self.users}
        self._key_of = key_of
        self._seq = 0
        self._rr = 0

    def __len__(self) -> int:
        return sum(len(q) for q in self.ready.values()) + sum(len(q) for q in self.parked.values())

    def length(self, user: str) -> int:
        return len(self.ready[user]) + len(self.parked[user])

    def push(self, user: str, name: str) -> None:
        self._seq += 1
        key = float(self._seq) if self._key_of is None else self._key_of(user, name, self._seq)
        heapq.heappush(self.ready[user], (key, self._seq, name))

    def park(self, user: str, name: str) -> None:
        self.parked[user].append(name)

    def unpark(self, users=None) -> int:
        """Parked tasks (of *users*, default all) enter their ready queue again, in the order they
        were parked (each gets its key anew)."""
        n = 0
        for u in (users if users is not None else self.users):
            p = self.parked.get(u)
            if p:
                n += len(p)
                while p:
                    self.push(u, p.popleft())
        return n

    def pop(self) -> tuple[str, str] | None:
        """The next (user, task) round-robin over users with ready tasks."""
        k = len(self.users)
        for j in range(k):
            u = self.users[(self._rr + j) % k]
            q = self.ready[u]
            if q:
                self._rr = (self._rr + j + 1) % k
                return u, heapq.heappop(q)[2]
        return None

    def remove(self, user: str, name: str) -> bool:
        q = self.ready[user]
        for i, item in enumerate(q):
            if item[2] == name:
                q[i] = q[-1]
                q.pop()
                heapq.heapify(q)
                return True
        try:
            self.parked[user].remove(name)
            return True
        except ValueError:
            return False

    def position(self, user: str, name: str) -> int:
        """1-based position counting ready tasks first (in serving order), then parked ones; 0 if absent."""
        for i, n in enumerate(self.iter_user(user)):
            if n == name:
                return i + 1
        return 0

    def iter_user(self, user: str) -> Iterator[str]:
        yield from (n for _, _, n in sorted(self.ready[user]))
        yield from self.parked[user]
