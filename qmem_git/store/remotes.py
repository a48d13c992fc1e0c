"""Remotes of the memory repository: config entries, URL kinds, credentials, transports, errors.

Remotes live in ``.git/config`` as C git writes them (``[remote "origin"] url``, ``fetch``), so
plain ``git fetch origin`` works in the memory folder too. URLs: a local path, ``file://``,
``git://``, ``http(s)://`` (smart HTTP) and ssh (``ssh://``, ``git+ssh://`` or scp-like
``user@host:path``, run through the system ``ssh`` by dulwich). Credentials in a URL never reach
output: every message that can name a URL goes through :func:`redact`. A malformed URL (no host,
an invalid host name or port) is refused when the remote is added. A push into a local
repository does what ``git receive-pack`` does (``store.receive``): hooks and
``receive.deny*`` apply as they do to C git's push.

HTTP Basic auth comes, in order, from the URL, from the explicit :class:`Credentials` (the CLI
fills them from ``QMEM_GIT_USERNAME``/``QMEM_GIT_TOKEN``) or, when the server answers 401, from
the user's git credential helpers (``git credential fill``, prompts disabled; without C git
dulwich reads ``~/.git-credentials``). Network waits are bounded by ``timeout``.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, NamedTuple

from qmem_git.errors import RemoteError, UsageError

if TYPE_CHECKING:
    from dulwich.client import GitClient
    from dulwich.config import ConfigFile, StackedConfig

    from qmem_git.store.receive import LocalClient

DEFAULT_REMOTE = "origin"
DEFAULT_TIMEOUT = 20.0
CREDENTIAL_HELPER_TIMEOUT = 15.0
# a memory remote has one branch; these stop a server streaming endless ref names while it
# streams, before memory grows (checked line by line, for every transport)
MAX_ADVERTISED_REFS = 10_000
MAX_ADVERTISED_BYTES = 4 << 20
_REMOTE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_SCP_LIKE = re.compile(r"^(?:[^@/:\s]+@)?(?P<host>[^@/:\s]+):(?P<path>.*)$")
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@")
_NETWORK_HINT = "check the URL with `qmem-git remote list` and that the server is reachable"
_AUTH_HINT = (
    "set QMEM_GIT_USERNAME and QMEM_GIT_TOKEN (a personal access token), or configure a git "
    "credential helper (`git config --global credential.helper store`)"
)
_REJECTED_HINT = (
    "the token from the URL or QMEM_GIT_TOKEN was refused: check that it has not expired, "
    "grants access to this repository, and that QMEM_GIT_USERNAME matches it"
)


class Credentials(NamedTuple):
    """Explicit HTTP Basic credentials (from the environment, read by the CLI)."""

    username: str | None = None
    password: str | None = None

    def secrets(self) -> tuple[str, ...]:
        return tuple(value for value in (self.password,) if value)


class Remote(NamedTuple):
    name: str
    url: str

    @property
    def display_url(self) -> str:
        return redact(self.url)

    @property
    def kind(self) -> str:
        return url_kind(self.url)

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "url": self.display_url, "kind": self.kind}


# --- URLs -------------------------------------------------------------------------------------


def url_kind(url: str) -> str:
    """``local``, ``file``, ``git``, ``http``, ``https`` or ``ssh``."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("ssh", "git+ssh", "ssh+git"):
        return "ssh"
    if scheme in ("file", "git", "http", "https"):
        return scheme
    if scheme:
        raise UsageError(
            f"unsupported remote URL scheme {scheme!r} in {redact(url)}",
            "use a path, file://, git://, http(s):// or ssh URL",
        )
    if _is_scp_like(url):
        return "ssh"
    return "local"


def _is_scp_like(url: str) -> bool:
    """git's rule: ``host:path`` is ssh when the colon comes before any slash."""
    match = _SCP_LIKE.match(url)
    if not match or "/" in match.group("host"):
        return False
    return not re.match(r"^[A-Za-z]:[\\/]", url)  # C:\path is a Windows path


def redact(text: str) -> str:
    """Hide user info in every URL of ``text``: ``https://***@host/...``."""
    return _URL_USERINFO.sub(r"\1***@", text)


def redact_all(text: str, secrets: tuple[str, ...] = ()) -> str:
    """:func:`redact`, and every known secret value replaced by ``***`` as well."""
    text = redact(text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def normalize_url(url: str, cwd: str) -> str:
    """Local paths become absolute (remotes outlive the directory they were added from)."""
    from urllib.parse import urlsplit

    url = url.strip()
    if not url:
        raise UsageError("the remote URL is empty", "give a path or a git URL")
    kind = url_kind(url)
    if kind == "local":
        return os.path.normpath(os.path.join(cwd, os.path.expanduser(url)))
    if kind == "file":
        if not urlsplit(url).path:
            raise _bad_url(url, "names no path")
        return url
    if kind == "ssh":
        _ssh_host(url)  # refuse option-like host names first
    host = _url_host(url) if "://" in url else _ssh_host(url)
    if not _valid_host(host):
        raise _bad_url(url, f"has an invalid host name {host!r}")
    return url


def _url_host(url: str) -> str:
    """The host of a ``git://`` or ``http(s)://`` URL; a usage error when it has none."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError as exc:
        raise _bad_url(url, "has an invalid port") from exc
    if not parts.hostname:
        raise _bad_url(url, "names no host")
    return parts.hostname


def _valid_host(host: str) -> bool:
    """A DNS name, an ssh config alias, an IPv4 address or a bracketed IPv6 address."""
    if ":" in host:  # IPv6 (urlsplit drops the brackets), optionally with a %zone
        address, _, zone = host.partition("%")
        return all(c in "0123456789abcdefABCDEF:." for c in address) and (
            not zone or zone.replace("-", "").replace(".", "").isalnum()
        )
    return not host.startswith(("-", ".")) and all(c.isalnum() or c in "-._" for c in host)


def _bad_url(url: str, problem: str) -> UsageError:
    return UsageError(
        f"remote URL {redact(url)} {problem}",
        "use a path, file:///path, git://host/repo, https://host/owner/repo.git, "
        "ssh://user@host/path or user@host:path",
    )


def split_http_credentials(url: str) -> tuple[str, str | None, str | None]:
    """(URL without user info, username, password) for an http(s) URL."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None, None
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    from urllib.parse import unquote

    username = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return clean, username, password


def _ssh_host(url: str) -> str:
    """The host an ssh URL connects to; option-like names (``-oProxyCommand``) are refused."""
    from urllib.parse import urlsplit

    if "://" in url:
        host = urlsplit(url).hostname or ""
    else:
        match = _SCP_LIKE.match(url)
        host = match.group("host") if match else ""
    if not host or host.startswith("-"):
        raise UsageError(f"{redact(url)} does not name an ssh host", "use ssh://user@host/path")
    return host


# --- config -----------------------------------------------------------------------------------


def check_remote_name(name: str) -> str:
    if not _REMOTE_NAME.match(name) or name.endswith((".lock", ".")) or ".." in name:
        raise UsageError(
            f"invalid remote name {name!r}",
            "use letters, digits, '.', '_' or '-' (for example 'origin')",
        )
    return name


def _config_path(git_dir: str) -> str:
    return os.path.join(git_dir, "config")


def _load_config(git_dir: str) -> ConfigFile:
    """The config to change (dulwich's writer keeps every other line as it is)."""
    from qmem_git.store.gitconfig import read_git_config

    return read_git_config(git_dir)


def list_remotes(git_dir: str) -> list[Remote]:
    from qmem_git.store.gitconfig import read_config_fast

    config = read_config_fast(git_dir)
    remotes = []
    for section in config.sections():
        if len(section) == 2 and section[0] == b"remote":
            try:
                url = config.get(section, b"url")
            except KeyError:
                continue
            remotes.append(Remote(section[1].decode("utf-8", "replace"), url.decode("utf-8")))
    return sorted(remotes, key=lambda remote: remote.name)


def get_remote(git_dir: str, name: str) -> Remote:
    for remote in list_remotes(git_dir):
        if remote.name == name:
            return remote
    known = ", ".join(r.name for r in list_remotes(git_dir)) or "none"
    raise UsageError(
        f"no remote named {name!r} (remotes: {known})",
        "add one with `qmem-git remote add NAME URL`",
    )


def default_remote(git_dir: str) -> Remote:
    """``origin`` when it exists, else the only remote; a usage error otherwise."""
    remotes = list_remotes(git_dir)
    for remote in remotes:
        if remote.name == DEFAULT_REMOTE:
            return remote
    if len(remotes) == 1:
        return remotes[0]
    if not remotes:
        raise UsageError(
            "this memory repository has no remote",
            "add one with `qmem-git remote add origin URL` (or `qmem-git init --remote URL`)",
        )
    names = ", ".join(r.name for r in remotes)
    raise UsageError(f"several remotes ({names}); say which one", "run `qmem-git sync NAME`")


def add_remote(git_dir: str, name: str, url: str) -> Remote:
    """Write ``[remote NAME]`` with a fetch refspec C git understands; refuses duplicates."""
    check_remote_name(name)
    config = _load_config(git_dir)
    section = (b"remote", name.encode("utf-8"))
    if config.has_section(section):
        raise UsageError(
            f"remote {name!r} already exists",
            f"remove it first with `qmem-git remote remove {name}`",
        )
    config.set(section, b"url", url.encode("utf-8"))
    config.set(section, b"fetch", f"+refs/heads/main:refs/remotes/{name}/main".encode())
    config.write_to_path(_config_path(git_dir))
    return Remote(name, url)


def remove_remote(git_dir: str, name: str) -> Remote:
    """Drop the config section and the remote-tracking ref."""
    remote = get_remote(git_dir, name)
    config = _load_config(git_dir)
    section = (b"remote", name.encode("utf-8"))
    del config[section]
    config.write_to_path(_config_path(git_dir))
    from dulwich.refs import DiskRefsContainer, Ref

    refs = DiskRefsContainer(git_dir)
    with contextlib.suppress(KeyError):
        refs.remove_if_equals(Ref(tracking_ref(name)), None)
    return remote


def tracking_ref(name: str) -> bytes:
    return f"refs/remotes/{name}/main".encode()


# --- transports -------------------------------------------------------------------------------


class Transport(NamedTuple):
    """A client for one URL (dulwich's, or :class:`~qmem_git.store.receive.LocalClient` for a
    local remote), the path to pass to it, and the remote branch (``main``; a hub's differ)."""

    client: GitClient | LocalClient
    path: str
    url: str
    secrets: tuple[str, ...]
    branch: bytes = b"refs/heads/main"  # the remote's branch a sync fetches and pushes (a hub's)


def open_transport(
    url: str,
    *,
    credentials: Credentials,
    env: Mapping[str, str],
    timeout: float,
    for_push: bool = False,
) -> Transport:
    """The client for ``url``; RemoteError when a local remote does not exist. A local remote
    is read directly (no ``dulwich.client``: a push to a path does not pay for its import)."""
    kind = url_kind(url)
    if kind in ("local", "file"):
        return _local_transport(url, for_push, env, timeout)
    cap_ref_advertisements()
    if kind == "git":
        from urllib.parse import urlsplit

        from dulwich.client import TCPGitClient

        parts = urlsplit(url)
        client = TCPGitClient(parts.hostname or "", port=parts.port)
        return Transport(client, parts.path, url, ())
    if kind == "ssh":
        return _ssh_transport(url, env, timeout)
    return _http_transport(url, credentials, env, timeout)


def _local_transport(url: str, for_push: bool, env: Mapping[str, str], timeout: float) -> Transport:
    from dulwich.errors import NotGitRepository

    from qmem_git.store.localrepo import LocalRepository

    path = _file_path(url) if url.startswith("file://") else url
    try:
        with LocalRepository(path) as repo:
            bare = repo.bare
    except (NotGitRepository, OSError) as exc:
        raise RemoteError(
            f"no git repository at {redact(url)}",
            "create one with `git init --bare PATH`, or fix the path with `qmem-git remote`",
        ) from exc
    packed = os.path.join(path, "packed-refs")
    if not os.path.exists(packed):
        packed = os.path.join(path, ".git", "packed-refs")
    if os.path.exists(packed) and os.path.getsize(packed) > MAX_ADVERTISED_BYTES:
        raise _too_many_refs(url)
    if for_push and not bare:
        raise RemoteError(
            f"{redact(url)} is a repository with a work tree; qmem-git pushes only to bare ones",
            "create the shared store with `git init --bare PATH`",
        )
    from qmem_git.store.receive import local_client

    return Transport(local_client(env, timeout), path, url, ())


def _file_path(url: str) -> str:
    from urllib.parse import urlsplit  # ~3 ms (ipaddress): only for a file:// URL

    return urlsplit(url).path


def cap_ref_advertisements() -> None:
    """Make dulwich's readers of a ref advertisement (git://, ssh, HTTP; protocol v1 and v2)
    stop at :data:`MAX_ADVERTISED_REFS` lines or :data:`MAX_ADVERTISED_BYTES`, while reading.
    dulwich offers no hook there, so its two module functions are wrapped, once."""
    import dulwich.client as client

    for name in ("read_pkt_refs_v1", "read_pkt_refs_v2"):
        original = getattr(client, name)
        if not getattr(original, "qmem_capped", False):
            setattr(client, name, _capped_reader(original))


def _capped_reader(original: Callable[[Iterator[bytes]], object]) -> Callable[..., object]:
    def read(pkt_seq: Iterator[bytes]) -> object:
        return original(_capped_lines(pkt_seq))

    read.qmem_capped = True  # type: ignore[attr-defined]
    return read


def _capped_lines(pkt_seq: Iterator[bytes]) -> Iterator[bytes]:
    size = 0
    for count, pkt in enumerate(pkt_seq, 1):
        size += len(pkt)
        if count > MAX_ADVERTISED_REFS or size > MAX_ADVERTISED_BYTES:
            raise _too_many_refs(None)
        yield pkt


def _too_many_refs(url: str | None) -> RemoteError:
    where = f"{redact(url)} has" if url else "the remote advertised"
    return RemoteError(
        f"{where} more than {MAX_ADVERTISED_REFS:,} refs or {MAX_ADVERTISED_BYTES >> 20} MiB "
        "of ref names; qmem-git stopped reading them",
        "a memory remote holds one branch (main); check the remote URL",
    )


def _ssh_transport(url: str, env: Mapping[str, str], timeout: float) -> Transport:
    """dulwich's SSH client over the system ``ssh``: no password prompts, bounded connect.

    ``GIT_SSH_COMMAND`` replaces ``ssh`` as git's does (``ssh -i key``, ``ssh -F config``); it is
    split like a shell command line, not run by a shell, and must accept OpenSSH's ``-o``.
    """
    import shlex

    from dulwich.client import get_transport_and_path

    _ssh_host(url)
    seconds = max(1, int(timeout))
    try:
        base = shlex.split(env.get("GIT_SSH_COMMAND", "")) or ["ssh"]
    except ValueError as exc:  # an unclosed quote
        raise UsageError(
            f"GIT_SSH_COMMAND cannot be split into words ({exc})",
            hint="quote it as for a shell, e.g. GIT_SSH_COMMAND='ssh -i \"my key\"'",
        ) from exc
    command = shlex.join(
        [
            *base,
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={seconds}",
            "-o",
            f"ServerAliveInterval={seconds}",
            "-o",
            "ServerAliveCountMax=2",
        ]
    )
    client, path = get_transport_and_path(url, ssh_command=command)
    return Transport(client, path, url, ())


def _http_transport(
    url: str, credentials: Credentials, env: Mapping[str, str], timeout: float
) -> Transport:
    from dulwich.client import Urllib3HttpGitClient

    clean, username, password = split_http_credentials(url)
    if username is None and credentials.username:
        username, password = credentials.username, credentials.password
    elif username is None and credentials.password:
        username, password = "x-access-token", credentials.password
    secrets = tuple(v for v in (password, *credentials.secrets()) if v)
    callback = None if username is not None else _helper_callback(clean, env, timeout)
    client = Urllib3HttpGitClient(
        clean.rstrip("/") + "/",
        config=_user_config(),
        username=username,
        password=password,
        timeout=timeout,
        auth_callback=callback,
    )
    _bound_retries(client.pool_manager)
    return Transport(client, "", url, secrets)


def _bound_retries(pool_manager: object) -> None:
    """urllib3 retries a failed connect three times by default: four timeouts, not one."""
    from urllib3.util import Retry

    pool_kw = getattr(pool_manager, "connection_pool_kw", None)
    if isinstance(pool_kw, dict):
        pool_kw["retries"] = Retry(total=3, connect=1, read=0, redirect=3, status=0)


def _user_config() -> StackedConfig:
    from dulwich.config import StackedConfig

    return StackedConfig.default()


def _helper_callback(
    url: str, env: Mapping[str, str], timeout: float
) -> Callable[[str, str, int], dict[str, str] | None]:
    """Ask the credential helpers once, on the first 401."""

    def callback(request_url: str, www_authenticate: str, attempt: int) -> dict[str, str] | None:
        del request_url, www_authenticate
        if attempt > 1:
            return None
        found = credential_fill(url, env, timeout)
        if found is None:
            return None
        return {"username": found[0], "password": found[1]}

    return callback


def credential_fill(url: str, env: Mapping[str, str], timeout: float) -> tuple[str, str] | None:
    """(username, password) from the user's git credential helpers, or None.

    Runs ``git credential fill`` with terminal prompts disabled, so the helpers configured for
    this URL answer exactly as they would for ``git push``. Without C git, dulwich reads the
    plain ``~/.git-credentials`` store.
    """
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    request = f"protocol={parts.scheme}\nhost={parts.netloc}\npath={parts.path.lstrip('/')}\n\n"
    import subprocess

    child_env = {**env, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": ""}
    try:
        proc = subprocess.run(
            ["git", "credential", "fill"],
            input=request,
            capture_output=True,
            text=True,
            env=child_env,
            timeout=min(timeout, CREDENTIAL_HELPER_TIMEOUT),
            check=False,
        )
    except FileNotFoundError:
        return _credentials_from_store(parts.scheme, parts.hostname or "")
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        return None
    values = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    if "username" not in values or "password" not in values:
        return None
    return values["username"], values["password"]


def _credentials_from_store(scheme: str, host: str) -> tuple[str, str] | None:
    from dulwich.client import get_credentials_from_store

    for username, password in get_credentials_from_store(scheme, host):
        return username, password
    return None


@contextlib.contextmanager
def socket_timeout(seconds: float) -> Iterator[None]:
    """Bound every blocking socket call made meanwhile (git:// has no timeout of its own)."""
    import socket

    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


# --- errors -----------------------------------------------------------------------------------


def remote_error(
    exc: BaseException, url: str, action: str, secrets: tuple[str, ...] = ()
) -> RemoteError:
    """One clear, redacted line (exit 5) for whatever the transport raised."""
    where = redact(url)
    text = redact_all(_describe(exc), secrets)
    message, hint = _classify(exc, text, where, action)
    if hint == _AUTH_HINT and secrets:  # a token was given (URL or QMEM_GIT_TOKEN): it failed
        message = message.replace("authentication required", "the token was rejected")
        hint = _REJECTED_HINT
    return RemoteError(redact_all(message, secrets), hint)


def _describe(exc: BaseException) -> str:
    """The exception's words; a callable among its arguments (dulwich's dumb-HTTP client has
    put a bound method there) is left out, and a RecursionError says what it means."""
    if isinstance(exc, RecursionError):
        return "the remote's history is nested too deeply to read"
    text = str(exc)
    if _CALLABLE_REPR.search(text):
        words = [str(arg) for arg in exc.args if not callable(arg)]
        text = _CALLABLE_REPR.sub("", " ".join(words))
    return " ".join((text or type(exc).__name__).split())


_CALLABLE_REPR = re.compile(r"<(?:bound method|function|built-in method|method)[^>]*>")


def _classify(exc: BaseException, text: str, where: str, action: str) -> tuple[str, str]:
    import socket

    from dulwich.client import HTTPUnauthorized
    from dulwich.errors import HangupException, NotGitRepository

    lowered = text.lower()
    if isinstance(exc, HTTPUnauthorized) or " 401" in lowered:
        return f"{action} {where} failed: authentication required (HTTP 401)", _AUTH_HINT
    if " 403" in lowered:
        return f"{action} {where} failed: access denied (HTTP 403)", _AUTH_HINT
    if isinstance(exc, NotGitRepository) or " 404" in lowered:
        return f"{action} {where} failed: no git repository there", _NETWORK_HINT
    if (
        isinstance(exc, socket.gaierror)
        or "name or service not known" in lowered
        or ("failed to resolve" in lowered or "temporary failure in name resolution" in lowered)
    ):
        return f"{action} {where} failed: the host name does not resolve", _NETWORK_HINT
    if isinstance(exc, ConnectionRefusedError) or "connection refused" in lowered:
        return f"{action} {where} failed: connection refused", _NETWORK_HINT
    if isinstance(exc, TimeoutError) or "timed out" in lowered or "timeout" in lowered:
        return f"{action} {where} failed: timed out", _NETWORK_HINT
    if isinstance(exc, (HangupException, ConnectionError, EOFError)) or "hung up" in lowered:
        return f"{action} {where} failed: the remote hung up ({text})", _NETWORK_HINT
    return f"{action} {where} failed: {text}", _NETWORK_HINT


def create_bare_repository(path: str) -> None:
    """An empty bare repository on branch ``main`` to share memory through (a shared disk)."""
    from dulwich.refs import HEADREF, Ref
    from dulwich.repo import Repo

    os.makedirs(path, exist_ok=True)
    with Repo.init_bare(path) as repo:
        repo.refs.set_symbolic_ref(HEADREF, Ref(b"refs/heads/main"))
