"""A push to a path remote, run as the CLI runs it, imports only what a push needs: the
modules a sync with nothing to fetch never uses stay unloaded (each costs every push a few
milliseconds, see docs/benchmarks.md), so a stray top-level import cannot creep back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from servers import Machine, git_in, init_bare

from qmem_git.store.relocate import repository

# what a push of one commit to a path remote does not need
NOT_ON_A_PUSH = frozenset(
    {
        "click",  # the CLI's parser: fastpath serves a plain sync
        "dulwich.client",  # network clients: a path remote is read directly
        "dulwich.config",  # plainconfig reads the plain config files
        "dulwich.graph",  # relation finds a near ancestor itself
        "dulwich.object_store",  # the commits made here are loose: read from their files
        "dulwich.pack",  # ... and stored loose in the remote
        "dulwich.protocol",
        "dulwich.repo",  # a plain bare remote is opened from its files
        "qmem_git.cli",
        "qmem_git.ops.lifecycle",  # index checks, init: ops.required is enough
        "qmem_git.ops.tierindex",
        "shutil",  # nothing to remove: no quarantine for a push without pre-receive
        "subprocess",  # no hook to run
        "tempfile",  # a small push is written loose, not as a pack
    }
)

SCRIPT = """
import sys
from qmem_git.__main__ import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    out.write(f"{code}\\n" + "\\n".join(sorted(sys.modules)))
"""


def _pushed_modules(machine: Machine, remote: Path, tmp_path: Path) -> list[str]:
    """The modules a ``sync`` that pushes one commit loaded, run as the CLI runs it."""
    report = tmp_path / f"modules-{machine.name}.txt"
    argv = [sys.executable, "-c", SCRIPT, str(report), "--memory-dir", str(machine.root)]
    done = subprocess.run([*argv, "-q", "sync"], env=machine.env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    code, *modules = report.read_text().splitlines()
    assert code == "0"
    assert git_in(remote, "rev-parse", "main").strip() == machine.head()  # it did push
    assert "dulwich.objects" in modules  # the report is of the real run
    return modules


def test_a_push_to_a_path_imports_only_what_it_needs(tmp_path: Path) -> None:
    remote = init_bare(tmp_path / "remote.git")
    machine = Machine(tmp_path, "a", [1_700_000_000])
    machine.remember("The release train leaves every Tuesday")
    machine.connect(str(remote))
    machine.remember("The staging database is rebuilt every night")
    modules = _pushed_modules(machine, remote, tmp_path)
    assert sorted(NOT_ON_A_PUSH & set(modules)) == []


def test_pushes_after_a_clone_read_no_pack(tmp_path: Path) -> None:
    """The cloned history is packed. Once a push has made the remote's tip a commit made
    here, the next push reads only the trees on the way to what it changed, all loose (the
    folders it did not touch are not read): dulwich's pack modules stay unloaded."""
    clock = [1_700_000_000]
    remote = init_bare(tmp_path / "remote.git")
    first = Machine(tmp_path, "a", clock)
    for fact in ("The release train leaves every Tuesday", "Dana owns the billing service"):
        first.remember(fact)
    first.connect(str(remote))
    git_in(remote, "repack", "-a", "-d", "-q")  # as a server's gc leaves it
    second = Machine(tmp_path, "b", clock)
    second.clone(str(remote))
    packs = list((Path(repository(str(second.root))) / "objects" / "pack").glob("*.pack"))
    assert packs, "the clone's history is packed"
    second.remember("The staging database is rebuilt every night")
    assert second.sync().pushed  # the remote's tip is packed here: this one reads packs
    second.remember("Deploys are frozen during the quarterly audit week")
    modules = _pushed_modules(second, remote, tmp_path)
    assert sorted({"dulwich.object_store", "dulwich.pack"} & set(modules)) == []
