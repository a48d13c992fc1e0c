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
from collections.abc import Callable, Iterable

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
