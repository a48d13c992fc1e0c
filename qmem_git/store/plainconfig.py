"""An exact reader of plain git config files, for the few settings a sync reads.

dulwich's config module costs a push ~8 ms to import (logging, pathlib) just to read a remote's
URL and a handful of ``core.*`` and ``receive.*`` settings. This reads what the files qmem-git
and ``git init`` write look like, and what a person typing into them usually adds: sections
``[name]`` and ``[name "subsection"]``, ``key = value`` and bare ``key`` lines, comments (whole
lines or after a value), blank lines. Anything else (quoted values, backslash escapes,
continuation lines, ``[section.sub]``, ``include``/``includeIf``, a key on a header's line, CR,
control characters, a byte order mark) makes :func:`parse` answer None, and the caller reads
the file with dulwich as before. What it does answer is what ``git config --list`` says
(``tests/store/test_plainconfig.py`` compares the two on generated files).

Lookups follow dulwich's ``ConfigFile`` (the callers were written for it): section names and
keys are case-insensitive, subsection names are not; a key set twice answers its last value; a
bare ``key`` reads as ``true``; ``get_boolean`` knows ``true`` and ``false``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

Section = tuple[bytes, ...]
# (section, subsection or None, key, value or None for a bare key), names lower-cased
Entry = tuple[bytes, "bytes | None", bytes, "bytes | None"]

_KEY_START = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_KEY_CHARS = _KEY_START | frozenset(b"0123456789-")
_BLANKS = b" \t"
_INCLUDES = (b"include", b"includeif")


class ConfigReader(Protocol):
    """What the sync's readers ask of a config: :class:`PlainConfig`, :class:`PlainStack` or
    dulwich's ``ConfigFile`` and ``StackedConfig``."""

    def get(self, section: tuple[bytes, ...], name: bytes) -> bytes: ...

    def get_boolean(
        self, section: tuple[bytes, ...], name: bytes, default: bool
    ) -> bool | None: ...


class FileReader(ConfigReader, Protocol):
    """One file's config: also its sections and their entries."""

    def sections(self) -> Iterable[tuple[bytes, ...]]: ...

    def items(self, section: tuple[bytes, ...]) -> Iterable[tuple[bytes, bytes]]: ...


class PlainConfig:
    """One parsed file: its entries in order, and per section the values of each key."""

    __slots__ = ("_order", "_values", "entries")

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self._values: dict[Section, dict[bytes, list[bytes]]] = {}
        self._order: list[Section] = []
        for section, subsection, key, value in entries:
            name = (section,) if subsection is None else (section, subsection)
            keys = self._values.get(name)
            if keys is None:
                keys = self._values[name] = {}
                self._order.append(name)
            keys.setdefault(key, []).append(b"true" if value is None else value)

    def _keys(self, section: Sequence[bytes | str]) -> dict[bytes, list[bytes]]:
        return self._values.get(_section(section), {})

    def get(self, section: Sequence[bytes | str], name: bytes | str) -> bytes:
        """The last value of ``name``; KeyError when it is not set."""
        return self._keys(section)[_lower(name)][-1]

    def get_boolean(
        self, section: Sequence[bytes | str], name: bytes | str, default: bool | None = None
    ) -> bool | None:
        try:
            value = self.get(section, name).lower()
        except KeyError:
            return default
        if value in (b"true", b"false"):
            return value == b"true"
        raise ValueError(f"not a valid boolean string: {value!r}")

    def sections(self) -> list[Section]:
        return list(self._order)

    def items(self, section: Sequence[bytes | str]) -> Iterator[tuple[bytes, bytes]]:
        for key, values in self._keys(section).items():
            for value in values:
                yield key, value


class PlainStack:
    """Several files, the first that sets a key wins (a repository's own config, then the
    user's), as dulwich's ``StackedConfig``."""

    __slots__ = ("backends",)

    def __init__(self, backends: list[PlainConfig]) -> None:
        self.backends = backends

    def get(self, section: Sequence[bytes | str], name: bytes | str) -> bytes:
        for backend in self.backends:
            try:
                return backend.get(section, name)
            except KeyError:
                pass
        raise KeyError(name)

    def get_boolean(
        self, section: Sequence[bytes | str], name: bytes | str, default: bool | None = None
    ) -> bool | None:
        for backend in self.backends:
            found = backend.get_boolean(section, name)
            if found is not None:
                return found
        return default


def read_plain(path: str) -> PlainConfig | None:
    """The file at ``path`` parsed, or None when it holds anything :func:`parse` leaves to
    dulwich. OSError (FileNotFoundError included) when it cannot be read."""
    with open(path, "rb") as handle:
        data = handle.read()
    return parse(data)


def read_plain_stack(paths: Sequence[str]) -> PlainStack | None:
    """The files of ``paths`` that exist, or None when one of them is not plain (or cannot be
    read for another reason than being absent: dulwich will say why)."""
    backends = []
    for path in paths:
        try:
            parsed = read_plain(path)
        except FileNotFoundError:
            continue
        except OSError:
            return None
        if parsed is None:
            return None
        backends.append(parsed)
    return PlainStack(backends)


def parse(data: bytes) -> PlainConfig | None:
    """The entries of a plain config file, or None (see the module's docstring)."""
    if b"\r" in data or b"\0" in data or data.startswith(b"\xef\xbb\xbf"):
        return None
    entries: list[Entry] = []
    section: tuple[bytes, bytes | None] | None = None
    for raw in data.split(b"\n"):
        line = raw.strip(_BLANKS)
        if not line or line[0] in b"#;":
            continue
        if line[0] == 0x5B:  # [
            section = _header(line)
            if section is None or section[0] in _INCLUDES:
                return None
            continue
        entry = _entry(line)
        if section is None or entry is None:
            return None
        entries.append((section[0], section[1], entry[0], entry[1]))
    return PlainConfig(entries)


def _header(line: bytes) -> tuple[bytes, bytes | None] | None:
    """``[name]`` or ``[name "subsection"]``, nothing but a comment after it."""
    close = line.find(b"]")
    rest = line[close + 1 :].lstrip(_BLANKS)
    if close < 0 or (rest and rest[0] not in b"#;"):
        return None
    inner = line[1:close]
    quote = inner.find(b'"')
    if quote < 0:
        return (inner.lower(), None) if _is_name(inner) else None
    name, subsection = inner[:quote], inner[quote + 1 :]
    if not name.endswith((b" ", b"\t")) or not subsection.endswith(b'"'):
        return None
    name, subsection = name.rstrip(_BLANKS), subsection[:-1]
    if not _is_name(name) or not subsection or not _plain_text(subsection, b'"\\'):
        return None
    return name.lower(), subsection


def _entry(line: bytes) -> tuple[bytes, bytes | None] | None:
    """``key``, ``key = value`` or ``key = value # comment`` (lower-cased key, value)."""
    end = 0
    while end < len(line) and line[end] in _KEY_CHARS:
        end += 1
    key, rest = line[:end], line[end:].lstrip(_BLANKS)
    if not key or key[0] not in _KEY_START:
        return None
    if not rest:
        return key.lower(), None
    if rest[0] != 0x3D:  # =
        return None
    value = rest[1:]
    for mark in (b"#", b";"):
        cut = value.find(mark)
        if cut >= 0:
            value = value[:cut]
    value = value.strip(_BLANKS)
    if not _plain_text(value, b'"\\\t'):
        return None
    return key.lower(), value


def _is_name(name: bytes) -> bool:
    return bool(name) and all(c in _KEY_CHARS for c in name)


def _plain_text(text: bytes, refused: bytes) -> bool:
    """No control character and none of ``refused``."""
    return all(c >= 0x20 and c != 0x7F for c in text) and not any(c in refused for c in text)


def _section(section: Sequence[bytes | str]) -> Section:
    if len(section) == 1:
        return (_lower(section[0]),)
    return (_lower(section[0]), *(_raw(part) for part in section[1:]))


def _lower(name: bytes | str) -> bytes:
    return (name.encode() if isinstance(name, str) else name).lower()


def _raw(name: bytes | str) -> bytes:
    return name.encode() if isinstance(name, str) else name
