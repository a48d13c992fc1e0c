"""How ``main`` stands against each remote's last-fetched ``main`` (``refs/remotes/<r>/main``)."""

from __future__ import annotations

from typing import NamedTuple

from dulwich.objects import Commit, ObjectID
from dulwich.refs import Ref

from qmem_git.store.repo import Repository
from qmem_git.store.revwalk import only_in


class Tracking(NamedTuple):
    """Commits ``main`` has that ``<remote>/main`` lacks (ahead) and the other way (behind)."""

    remote: str
    ahead: int
    behind: int


def tracking(memory_root: str) -> list[Tracking]:
    """One entry per remote-tracking ``main``, sorted by remote; none before a first sync."""
    with Repository(memory_root) as repo:
        _, main = repo.head(unborn_ok=True)
        found = []
        for ref, sha in sorted(repo.refs.as_dict(Ref(b"refs/remotes/")).items()):
            remote, _, branch = ref.decode("utf-8", "replace").rpartition("/")
            if branch != "main" or not remote:
                continue
            theirs = sha.decode("ascii")
            ours = [main] if main else []

            def info(commit: str) -> tuple[int, list[str]]:
                obj = repo.objects[ObjectID(commit.encode("ascii"))]
                if not isinstance(obj, Commit):
                    return 0, []
                return obj.commit_time, [p.decode("ascii") for p in obj.parents]

            ahead = len(only_in(info, ours, [theirs]).new)
            behind = len(only_in(info, [theirs], ours).new)
            found.append(Tracking(remote, ahead, behind))
        return found
