"""``revwalk.only_in`` against brute-force reachability, on hand-made and random histories."""

from __future__ import annotations

import random

import pytest

from qmem_git.store.revwalk import only_in

Graph = dict[str, tuple[int, list[str]]]  # commit -> (committer time, parents)


def reachable(graph: Graph, tips: list[str]) -> set[str]:
    seen: set[str] = set()
    stack = list(tips)
    while stack:
        sha = stack.pop()
        if sha not in seen:
            seen.add(sha)
            stack.extend(graph[sha][1])
    return seen


class Counting:
    """The graph as ``revwalk`` reads it, counting the commits it asks about."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.asked: set[str] = set()

    def __call__(self, sha: str) -> tuple[int, list[str]]:
        self.asked.add(sha)
        return self.graph[sha]


def linear(count: int, start: int = 0, first_parent: str | None = None) -> Graph:
    graph: Graph = {}
    parent = first_parent
    for number in range(start, start + count):
        graph[f"c{number}"] = (1000 + number, [parent] if parent else [])
        parent = f"c{number}"
    return graph


def test_a_push_of_one_commit_reads_a_few_commits_of_a_long_history() -> None:
    graph = linear(1000)
    graph["new"] = (5000, ["c999"])
    info = Counting(graph)
    span = only_in(info, ["new"], ["c999"])
    assert span.new == {"new"}
    assert "c999" in span.boundary
    assert len(info.asked) <= 3


def test_diverged_histories_stop_at_the_merge_base() -> None:
    graph = linear(500)
    graph.update({"a1": (3000, ["c499"]), "a2": (3001, ["a1"])})
    graph.update({"b1": (3000, ["c499"]), "b2": (3002, ["b1"])})
    graph["m"] = (3003, ["a2", "b2"])  # ours merged theirs
    info = Counting(graph)
    span = only_in(info, ["m"], ["b2"])
    assert span.new == {"m", "a2", "a1"}
    assert len(info.asked) <= 8


def test_a_remote_tip_dated_before_its_parent_is_still_excluded() -> None:
    graph = linear(50)
    # the remote's newest commit claims to be older than everything: walk order is wrong
    graph["remote"] = (1, ["c49"])
    graph["ours"] = (2, ["remote"])
    graph["ours2"] = (9999, ["ours"])
    span = only_in(Counting(graph), ["ours2"], ["remote"])
    assert span.new == {"ours", "ours2"}


def test_an_old_side_branch_merged_late_counts_only_what_the_remote_lacks() -> None:
    graph = linear(100)
    graph["side"] = (1010, ["c10"])  # branched long ago, never pushed
    graph["merge"] = (9000, ["c99", "side"])
    span = only_in(Counting(graph), ["merge"], ["c99"])
    assert span.new == {"merge", "side"}


@pytest.mark.parametrize("tip", ["c5", "c9"])
def test_nothing_is_new_when_the_remote_has_the_tip(tip: str) -> None:
    graph = linear(10)
    assert only_in(Counting(graph), [tip], ["c9"]).new == set()


def test_no_others_means_everything_is_new() -> None:
    graph = linear(20)
    assert only_in(Counting(graph), ["c19"], []).new == set(graph)


def random_dag(rng: random.Random, size: int, skewed: bool) -> Graph:
    """Commits with one to three parents among earlier ones. Times never decrease from parent
    to child (ties included), or, ``skewed``, jump back on about one commit in five."""
    graph: Graph = {"r0": (100, [])}
    for number in range(1, size):
        earlier = list(graph)
        parents = rng.sample(earlier, k=min(len(earlier), rng.choice((1, 1, 1, 2, 3))))
        newest = max(graph[parent][0] for parent in parents)
        step = rng.randint(-400, 50) if skewed and rng.random() < 0.2 else rng.choice((0, 1, 5))
        graph[f"r{number}"] = (newest + step, parents)
    return graph


@pytest.mark.parametrize("skewed", [False, True], ids=["ordered-clocks", "skewed-clocks"])
@pytest.mark.parametrize("seed", range(30))
def test_random_histories_match_brute_force_reachability(seed: int, skewed: bool) -> None:
    rng = random.Random(seed)
    graph = random_dag(rng, rng.randint(5, 120), skewed)
    names = list(graph)
    tips = rng.sample(names, k=rng.randint(1, 2))
    others = rng.sample(names, k=rng.randint(0, 3))
    span = only_in(Counting(graph), tips, others)
    theirs = reachable(graph, others)
    exact = reachable(graph, tips) - theirs
    if skewed:
        assert span.new >= exact and span.new <= reachable(graph, tips)
    else:
        assert span.new == exact
    assert span.boundary <= theirs
    # every path from a tip into their history meets the boundary first
    stack, seen = list(tips), set()
    while stack:
        sha = stack.pop()
        if sha in seen or sha in span.boundary:
            continue
        assert sha in span.new, f"{sha} is reached from a tip past the boundary"
        seen.add(sha)
        stack.extend(graph[sha][1])
