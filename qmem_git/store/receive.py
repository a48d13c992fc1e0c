"""Fetching from and pushing into a local repository (a path or ``file://``), the second as
``git receive-pack`` does.

dulwich's LocalGitClient writes the target's refs directly, so the target's ``pre-receive`` and
``update`` hooks never run and a push C git would refuse gets in. :class:`LocalReceiver` does
it with dulwich only: objects into a quarantine, ``pre-receive``, ``receive.deny*``,
``update``, a compare-and-swap ref update, then ``post-receive`` and ``post-update``.
:class:`LocalClient` answers what the sync asks a transport's client (``get_refs``,
``fetch_pack``, ``send_pack``) without ``dulwich.client``, whose import (sockets, bundles, the
network clients: ~6 ms) a push to a path never needs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, cast

from qmem_git.store.localrepo import LocalRepository

if TYPE_CHECKING:
    from subprocess import Popen

    from dulwich.client import DetermineWantsFunc
    from dulwich.object_store import GraphWalker, PackBasedObjectStore
    from dulwich.objects import ObjectID
    from dulwich.refs import Ref

    from qmem_git.store.sync import WholeObject, WholeObjects

# what C git clears before it runs receive-pack for a local push (``local_repo_env``)
_LOCAL_REPO_ENV = frozenset(
    {
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_CONFIG",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_PARAMETERS",
        "GIT_DIR",
        "GIT_GRAFT_FILE",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_INTERNAL_SUPER_PREFIX",
        "GIT_NAMESPACE",
        "GIT_NO_REPLACE_OBJECTS",
        "GIT_OBJECT_DIRECTORY",
        "GIT_PREFIX",
        "GIT_QUARANTINE_PATH",
        "GIT_REPLACE_REF_BASE",
        "GIT_SHALLOW_FILE",
        "GIT_WORK_TREE",
    }
)
_HOOK_MESSAGE_LIMIT = 300
ZERO_SHA = cast("ObjectID", b"0" * 40)  # dulwich.protocol's: a ref created or deleted


class RefsResult(NamedTuple):
    """The refs a local repository has (what ``get_refs`` and ``fetch_pack`` answer)."""

    refs: dict[Ref, ObjectID | None]


class SendResult(NamedTuple):
    """The refs after a local push, and per updated ref why it was refused (None: moved)."""

    refs: dict[Ref, ObjectID | None]
    ref_status: dict[bytes, str | None]


class LocalClient:
    """The client of a local remote: dulwich's LocalGitClient's three calls a sync makes, with
    pushes that do what ``git receive-pack`` does.

    Plain LocalGitClient writes the target's refs directly, so its ``pre-receive`` and
    ``update`` hooks never run and a push C git would refuse gets in.
    """

    def __init__(self, env: Mapping[str, str], timeout: float) -> None:
        self.env = env
        self.timeout = timeout

    def get_refs(self, path: str | bytes) -> RefsResult:
        with LocalRepository(os.fsdecode(path)) as source:
            return RefsResult(dict(source.get_refs()))

    def fetch_pack(
        self,
        path: str | bytes,
        determine_wants: DetermineWantsFunc,
        graph_walker: GraphWalker,
        pack_data: Callable[[bytes], int],
        progress: Callable[[bytes], None] | None = None,
    ) -> RefsResult:
        """The pack for ``determine_wants``, as ``sync.pack_records`` makes it (as for a push):
        dulwich's own reads every object of the source for every fetch, new or not."""
        del progress  # qmem-git fetches main whole: no depth, filter or ref prefix
        with LocalRepository(os.fsdecode(path)) as source:
            refs = source.get_refs()
            wants = determine_wants(refs, None)
            if wants:
                store = source.object_store
                _write_pack(store, wants, store.find_common_revisions(graph_walker), pack_data)
            return RefsResult(dict(refs))

    def send_pack(
        self,
        path: str | bytes,
        update_refs: Callable[[dict[Ref, ObjectID]], dict[Ref, ObjectID]],
        whole_objects: WholeObjects,
        progress: Callable[[bytes], None] | None = None,
    ) -> SendResult:
        """Push: ``whole_objects(have, want)`` gives the objects the target lacks (as
        ``sync.pack_records`` reads them)."""
        receiver = LocalReceiver(os.fsdecode(path), self.env, self.timeout, progress)
        return receiver.receive(update_refs, whole_objects)


def local_client(env: Mapping[str, str], timeout: float) -> LocalClient:
    """The client for a local remote (see :class:`LocalClient`)."""
    return LocalClient(env, timeout)


INCOMING_PREFIX = "tmp_objdir-incoming-"
# as C git's receive-pack (``receive.unpackLimit``, else ``transfer.unpackLimit``, else 100): a
# push of fewer objects is stored loose, a larger one as a pack. One pack per push left a path
# remote with hundreds of packs, which every later fetch, clone and push searched one by one
UNPACK_LIMIT = 100
# the remote's loose objects are packed once this many pile up (C git's ``gc --auto`` after
# a push waits for ~6,700): ~200 pushes of one commit
REMOTE_LOOSE_TO_PACK = 1024
STALE_INCOMING_SECONDS = 3600  # a receive running now is younger; one killed is garbage


def _remove_stale_incoming(objects_dir: str) -> None:
    """Quarantines a killed receive left in the target (the pack it was sent): an hour old,
    no receive is still using one (no lock tells, as C git's receive-pack does not either)."""
    cutoff = time.time() - STALE_INCOMING_SECONDS
    with contextlib.suppress(OSError):
        for name in os.listdir(objects_dir):
            path = os.path.join(objects_dir, name)
            if name.startswith(INCOMING_PREFIX) and os.lstat(path).st_mtime < cutoff:
                import shutil  # lazily: it imports bz2 and lzma

                shutil.rmtree(path, ignore_errors=True)


def _write_pack(
    store: PackBasedObjectStore,
    wants: list[ObjectID],
    haves: list[ObjectID],
    write: Callable[[bytes], int],
) -> None:
    from dulwich.pack import write_pack_data

    from qmem_git.store.sync import pack_records, unpacked

    count, records = pack_records(store, wants, haves, foreign=True)
    write_pack_data(
        lambda data: write(bytes(data)), unpacked(records), store.object_format, num_records=count
    )


class LocalReceiver:
    """``git receive-pack`` for a local target, with dulwich (no C git).

    The objects go into a quarantine object directory inside the target (as C git's
    ``tmp_objdir-incoming-*``); ``pre-receive`` runs with ``GIT_QUARANTINE_PATH`` and sees
    them through ``GIT_OBJECT_DIRECTORY``/``GIT_ALTERNATE_OBJECT_DIRECTORIES``; only when it
    accepts are they moved in. Then per ref: ``receive.denyDeletes`` and
    ``receive.denyNonFastForwards``, the ``update`` hook, a compare-and-swap ref update; then
    ``post-receive`` and ``post-update`` (their exit status is ignored, as git does).
    Hooks run with the target's git dir as working directory and ``GIT_DIR`` set. All the
    hooks of one receive share one ``timeout``: the clock starts when the first one runs.
    """

    def __init__(
        self,
        path: str,
        env: Mapping[str, str],
        timeout: float,
        progress: Callable[[bytes], None] | None,
    ) -> None:
        self.path = path
        self.env = {k: v for k, v in env.items() if k not in _LOCAL_REPO_ENV}
        self.timeout = timeout
        self.progress = progress
        self._deadline: float | None = None  # set when the first hook starts
        with LocalRepository(path, self.env) as target:
            self.git_dir = target.git_dir
            self.config = target.config
            self.bare = target.bare
        self.objects_dir = os.path.join(self.git_dir, "objects")

    def receive(
        self,
        update_refs: Callable[[dict[Ref, ObjectID]], dict[Ref, ObjectID]],
        whole_objects: WholeObjects,
    ) -> SendResult:
        with LocalRepository(self.path) as target:
            old_refs = target.get_refs()
            new_refs = update_refs(dict(old_refs))
        refs: dict[Ref, ObjectID | None] = dict(new_refs)
        updates = [
            (ref, old_refs.get(ref, ZERO_SHA), sha)
            for ref, sha in sorted(new_refs.items())
            if old_refs.get(ref, ZERO_SHA) != sha
        ]
        if not updates:
            return SendResult(refs, {})
        have = {sha for sha in old_refs.values() if sha != ZERO_SHA}
        want = {sha for _, _, sha in updates if sha != ZERO_SHA and sha not in have}
        declined = self._receive_objects(have, want, whole_objects, updates)
        if declined is not None:
            return SendResult(refs, {ref: declined for ref, _, _ in updates})
        status: dict[bytes, str | None] = {}
        with LocalRepository(self.path) as target:  # again: it sees the objects moved in
            for ref, old, new in updates:
                status[ref] = (
                    self._denied(ref, old, new)
                    or self.run_hook("update", [ref, old, new])
                    or _move_ref(target, ref, old, new, self._reflog_message(ref))
                )
        done = [update for update in updates if status[update[0]] is None]
        if done:
            self.run_hook("post-receive", stdin=_ref_lines(done))
            self.run_hook("post-update", [ref for ref, _, _ in done])
            # housekeeping, as C git's gc --auto: a failure there does not undo the push
            with contextlib.suppress(Exception):
                self.pack_loose_objects()
        return SendResult(refs, status)

    def _receive_objects(
        self,
        have: set[ObjectID],
        want: set[ObjectID],
        whole_objects: WholeObjects,
        updates: list[tuple[Ref, ObjectID, ObjectID]],
    ) -> str | None:
        """Objects in, behind a quarantine when ``pre-receive`` is there to see them first
        (as C git's ``tmp_objdir``); why it declined. Without that hook a quarantine only
        delays the same moves: a push that fails afterwards (``update`` hook, the ref moved)
        leaves its objects unreferenced in both ways, as C git's does."""
        _remove_stale_incoming(self.objects_dir)
        count, records = whole_objects(have, want) if want else (0, None)
        loose = count < self._unpack_limit()
        if self.hook_path("pre-receive") is None:
            if records is not None:
                self._store_objects(self.objects_dir, count, records, loose)
            return None
        quarantine = os.path.join(self.objects_dir, INCOMING_PREFIX + os.urandom(6).hex())
        os.makedirs(os.path.join(quarantine, "pack"))
        try:
            if records is not None:
                self._store_objects(quarantine, count, records, loose)
            declined = self.run_hook(
                "pre-receive",
                stdin=_ref_lines(updates),
                extra_env={
                    "GIT_QUARANTINE_PATH": quarantine,
                    "GIT_OBJECT_DIRECTORY": quarantine,
                    "GIT_ALTERNATE_OBJECT_DIRECTORIES": self.objects_dir,
                },
            )
            if declined is None:
                from qmem_git.store.loose import migrate_loose

                migrate_loose(quarantine, self.objects_dir)
                _migrate_packs(os.path.join(quarantine, "pack"), self.objects_dir)
            return declined
        finally:
            import shutil  # lazily: it imports bz2 and lzma

            shutil.rmtree(quarantine, ignore_errors=True)

    def _store_objects(
        self, objects_dir: str, count: int, records: Iterator[WholeObject], loose: bool
    ) -> None:
        """The pushed objects into ``objects_dir``: loose, or as one pack."""
        if loose:
            from qmem_git.store.loose import write_loose_raw

            fsync = self._config_flag(b"fsyncObjectFiles", b"core")  # as dulwich's own writes
            for record in records:
                write_loose_raw(objects_dir, record.obj_type_num, record.decomp_chunks, fsync)
            return
        from dulwich.object_store import DiskObjectStore

        from qmem_git.store.sync import unpacked

        others = [self.objects_dir] if objects_dir != self.objects_dir else []
        store = DiskObjectStore(objects_dir, alternates=others)
        try:
            store.add_pack_data(count, unpacked(records))
        finally:
            store.close()

    def _unpack_limit(self) -> int:
        for section in (b"receive", b"transfer"):
            try:
                return int(self.config.get((section,), b"unpackLimit"))
            except (KeyError, ValueError):
                continue
        return UNPACK_LIMIT

    def pack_loose_objects(self) -> None:
        """Pack the remote's loose objects once :data:`REMOTE_LOOSE_TO_PACK` pile up (no
        ``gc`` runs there otherwise)."""
        from qmem_git.store.sync import count_loose, estimate_loose, pack_loose

        # a few folders of 256 are read, not all, after every push (exact for tests' limits)
        folders = min(256, -(-64 * 256 // REMOTE_LOOSE_TO_PACK))
        if folders < 256:
            count = estimate_loose(self.objects_dir, folders)
        else:
            count = count_loose(self.objects_dir, REMOTE_LOOSE_TO_PACK)
        if count < REMOTE_LOOSE_TO_PACK:
            return
        with LocalRepository(self.path) as target:  # other pushes may write into its folders
            pack_loose(target.object_store, self.objects_dir, prune=False)

    def _denied(self, ref: Ref, old: ObjectID, new: ObjectID) -> str | None:
        if new == ZERO_SHA:
            return "deletion prohibited" if self._config_flag(b"denyDeletes") else None
        if old == ZERO_SHA or not self._config_flag(b"denyNonFastForwards"):
            return None
        from dulwich.graph import can_fast_forward
        from dulwich.repo import Repo  # its parents provider (grafts, shallow), as git's

        with Repo(self.path) as target:
            return None if can_fast_forward(target, old, new) else "non-fast-forward"

    def _reflog_message(self, ref: Ref) -> bytes | None:
        """``push`` when C git's receive-pack would log this ref's update, else None: when the
        ref has a log already, or ``core.logAllRefUpdates`` asks for one (``always``; true or,
        unset, in a repository with a work tree: branches). A bare remote keeps none by default;
        dulwich's own rule (always log) grew it by a line per push."""
        if os.path.isfile(os.path.join(self.git_dir, "logs", os.fsdecode(ref))):
            return b"push"
        try:
            value = self.config.get((b"core",), b"logAllRefUpdates").lower()
        except KeyError:
            value = b"false" if self.bare else b"true"
        if value == b"always":
            return b"push"
        heads = ref.startswith((b"refs/heads/", b"refs/remotes/", b"refs/notes/"))
        return b"push" if heads and value in (b"true", b"yes", b"on", b"1") else None

    def _config_flag(self, name: bytes, section: bytes = b"receive") -> bool:
        try:
            return bool(self.config.get_boolean((section,), name, False))
        except ValueError:
            return False

    def hook_path(self, name: str) -> str | None:
        """The target's executable hook ``name`` (``core.hooksPath`` honoured), or None."""
        try:
            hooks = os.fsdecode(self.config.get((b"core",), b"hooksPath"))
        except KeyError:
            hooks = "hooks"
        path = os.path.join(self.git_dir, os.path.expanduser(hooks), name)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None

    def run_hook(
        self,
        name: str,
        args: Sequence[bytes] = (),
        *,
        stdin: bytes = b"",
        extra_env: Mapping[str, str] | None = None,
    ) -> str | None:
        """Run hook ``name`` if the target has it; None when it accepts (or is absent)."""
        path = self.hook_path(name)
        if path is None:
            return None
        import subprocess  # only when the target has the hook (~3 ms to import)

        env = {**self.env, "GIT_DIR": self.git_dir, **(extra_env or {})}
        argv = [path, *(os.fsdecode(arg) for arg in args)]
        if self._deadline is None:
            self._deadline = time.monotonic() + self.timeout
        try:
            proc = _run_hook_process(argv, stdin, self.git_dir, env, self._deadline)
        except subprocess.TimeoutExpired:
            return f"{name} hook timed out (the push's hooks have {self.timeout:g} s in all)"
        except OSError as exc:
            return f"{name} hook could not run ({exc.strerror or exc})"
        self._show(proc.stdout + proc.stderr)
        if proc.returncode == 0:
            return None
        said = " ".join((proc.stderr or proc.stdout).decode("utf-8", "replace").split())
        if len(said) > _HOOK_MESSAGE_LIMIT:
            said = said[: _HOOK_MESSAGE_LIMIT - 1] + "…"
        return f"{name} hook declined" + (f": {said}" if said else "")

    def _show(self, output: bytes) -> None:
        if self.progress is None:
            return
        for line in output.decode("utf-8", "replace").splitlines():
            if line.strip():
                self.progress(f"remote: {line}".encode())


class _HookRun(NamedTuple):
    returncode: int
    stdout: bytes
    stderr: bytes


def _run_hook_process(
    argv: list[str], stdin: bytes, cwd: str, env: Mapping[str, str], deadline: float
) -> _HookRun:
    """Run a hook until ``deadline`` (monotonic); without ``#!`` it runs under ``/bin/sh``, as
    git runs it. TimeoutExpired when the deadline passes (its whole process group killed)."""
    try:
        return _run_in_own_group(argv, stdin, cwd, env, deadline)
    except OSError as exc:
        if exc.errno != errno.ENOEXEC:
            raise
    return _run_in_own_group(["/bin/sh", *argv], stdin, cwd, env, deadline)


def _run_in_own_group(
    argv: list[str], stdin: bytes, cwd: str, env: Mapping[str, str], deadline: float
) -> _HookRun:
    """Popen in a new session, so a timeout kills what the hook started too.

    ``subprocess.run(timeout=)`` kills only the direct child: a hook's ``sleep 60`` would be
    left behind (adopted by init) on every sync.
    """
    import subprocess

    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise subprocess.TimeoutExpired(argv, 0)
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(stdin, timeout=remaining)
        except BaseException:  # the timeout, or an interrupt: leave nothing running
            _kill_group(proc)
            raise
        return _HookRun(proc.returncode, stdout, stderr)


def _kill_group(proc: Popen[bytes]) -> None:
    """SIGKILL the hook's process group, then reap the hook (its pipes are not read again:
    a process that left the group may still hold them open)."""
    import signal

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()  # in case the group is gone but the hook itself is not (never blocks)
    proc.wait()


def _ref_lines(updates: Sequence[tuple[Ref, ObjectID, ObjectID]]) -> bytes:
    """``<old> <new> <ref>`` lines, what ``pre-receive`` and ``post-receive`` read."""
    return b"".join(old + b" " + new + b" " + ref + b"\n" for ref, old, new in updates)


def _move_ref(
    target: LocalRepository, ref: Ref, old: ObjectID, new: ObjectID, message: bytes | None
) -> str | None:
    """Compare-and-swap ``ref`` from ``old`` to ``new`` (zero id: absent); why it failed.
    ``message``: the reflog line's (None: no reflog line)."""
    from dulwich.file import FileLocked

    try:
        if new == ZERO_SHA:
            moved = target.refs.remove_if_equals(ref, old, message=message)
        else:
            moved = target.refs.set_if_equals(ref, old, new, message=message)
    except FileLocked as exc:  # as C git's receive-pack words it
        lock = os.fsdecode(exc.lockfilename)
        return f"cannot lock ref '{ref.decode()}': Unable to create '{lock}': File exists."
    return None if moved else "failed to update ref (it moved meanwhile)"


def _migrate_packs(pack_dir: str, objects_dir: str) -> None:
    """Move accepted packs in, each .pack before its .idx (as C git does)."""
    target = os.path.join(objects_dir, "pack")
    os.makedirs(target, exist_ok=True)
    names = sorted(os.listdir(pack_dir))
    for suffix in (".pack", ".rev", ".bitmap", ".idx"):
        for name in names:
            if name.endswith(suffix):
                os.replace(os.path.join(pack_dir, name), os.path.join(target, name))
