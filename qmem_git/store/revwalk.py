"""Which commits one side of a sync lacks, without walking the whole history.

``git rev-list TIP ^OTHER`` in small: the walk goes newest first (committer time) from both
sides, marking what ``OTHER`` reaches, and stops once every commit still queued is reachable
from ``OTHER``. A push of a few commits on a long history reads a few commits, not all of them.

Committer times only order the walk. Where a clock went backwards (a parent newer than its
child), the walk may stop before it learns that ``OTHER`` reaches a commit it already took as
new: the answer can then hold more than it should, never less. Both users can afford that: a
push sends such a commit's objects again and checks it again (it passed the same checks when it
arrived).
"""

from __future__ import annotations

import heapq
import stat
from collections.abc import Callable, Collection, Iterable

from dulwich.objects import S_ISGITLINK, Commit, ObjectID, Tag, Tree

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dulwich.object_store import BaseObjectStore

# a commit's (committer time, parent ids)
CommitInfo = Callable[[str], tuple[int, list[str]]]


class Range:
    """``new``: commits reachable from the tips and not from the others (a superset where clocks
    went backwards). ``boundary``: commits the others reach that the walk met; every path from a
    tip leaves ``new`` through one of them."""

    __slots__ = ("boundary", "new")

    def __init__(self, new: set[str], boundary: set[str]) -> None:
        self.new = new
        self.boundary = boundary


def only_in(info: CommitInfo, tips: Iterable[str], others: Iterable[str]) -> Range:
    """The commits reachable from ``tips`` and from none of ``others`` (all ids hex)."""
    walk = _Walk(info)
    for sha in others:
        walk.mark(sha, reached=True)
    for sha in tips:
        walk.mark(sha, reached=False)
    walk.run()
    new = {sha for sha, reached in walk.reached.items() if not reached}
    return Range(new, {sha for sha, reached in walk.reached.items() if reached})


class _Walk:
    def __init__(self, info: CommitInfo) -> None:
        self.info = info
        self.reached: dict[str, bool] = {}  # commit -> reachable from the others
        # (-time, taken as new, commit): newest first, at equal times what the others reach
        self.queue: list[tuple[int, bool, str]] = []
        self.done: set[tuple[str, bool]] = set()

    def mark(self, sha: str, *, reached: bool) -> None:
        known = self.reached.get(sha)
        if known is None or (reached and not known):
            self.reached[sha] = reached
            heapq.heappush(self.queue, (-self.info(sha)[0], not reached, sha))

    def run(self) -> None:
        while self.queue and self._open():
            _, _, sha = heapq.heappop(self.queue)
            reached = self.reached[sha]
            if (sha, reached) in self.done:
                continue
            self.done.add((sha, reached))
            for parent in self.info(sha)[1]:
                self.mark(parent, reached=reached)

    def _open(self) -> bool:
        """Whether a queued commit may still lead to one the others lack."""
        return any(not self.reached[sha] for _, _, sha in self.queue)


def objects_to_send(
    store: BaseObjectStore, wants: Collection[ObjectID], haves: Collection[ObjectID]
) -> list[ObjectID]:
    """What a side that has ``haves`` lacks to have the commits ``wants``: the commits between
    them, with the trees and blobs the trees of the nearest commits it has do not hold. (dulwich's
    own answer walks every commit it has and reads every packed object on each push.) Something
    it has from further back may be sent again, which is harmless."""
    reader = _Reader(store)
    tips = [sha for sha in map(reader.peel, wants) if sha is not None]
    span = only_in(reader.info, tips, [sha for sha in map(reader.peel, haves) if sha is not None])
    known: set[ObjectID] = set()
    for sha in span.boundary:
        reader.tree_objects(reader.commit(sha).tree, known, [])
    send: list[ObjectID] = []
    for sha in sorted(span.new):
        send.append(ObjectID(sha.encode("ascii")))
        reader.tree_objects(reader.commit(sha).tree, known, send)
    return send


class _Reader:
    def __init__(self, store: BaseObjectStore) -> None:
        self.store = store
        self.commits: dict[str, Commit] = {}

    def commit(self, sha: str) -> Commit:
        found = self.commits.get(sha)
        if found is None:
            obj = self.store[ObjectID(sha.encode("ascii"))]
            if not isinstance(obj, Commit):
                raise ValueError(f"{sha} is not a commit")
            found = self.commits[sha] = obj
        return found

    def peel(self, sha: ObjectID) -> str | None:
        """The commit ``sha`` stands for (an annotated tag: the commit it tags), else None: a
        remote advertises tags beside its branches."""
        obj = self.store[sha]
        while isinstance(obj, Tag):
            obj = self.store[obj.object[1]]
        if not isinstance(obj, Commit):
            return None
        found = _hex(obj.id)
        self.commits.setdefault(found, obj)
        return found

    def info(self, sha: str) -> tuple[int, list[str]]:
        commit = self.commit(sha)
        return commit.commit_time, [_hex(parent) for parent in commit.parents]

    def tree_objects(self, tree: ObjectID, known: set[ObjectID], out: list[ObjectID]) -> None:
        """Add ``tree`` and what it holds to ``out`` (and ``known``), skipping what is known."""
        if tree in known:
            return
        known.add(tree)
        out.append(tree)
        obj = self.store[tree]
        if not isinstance(obj, Tree):
            raise ValueError(f"{_hex(tree)} is not a tree")
        for _, mode, sha in obj.iteritems():
            if stat.S_ISDIR(mode):
                self.tree_objects(sha, known, out)
            elif not S_ISGITLINK(mode) and sha not in known:
                known.add(sha)
                out.append(sha)


def _hex(sha: bytes) -> str:
    return sha.decode("ascii")
