"""The strict YAML reading of a memory file's frontmatter (python-frontmatter with PyYAML).

Its own module so that only the checks that read YAML import it: PyYAML and python-frontmatter
cost ~25 ms to import, which a push or a fast-forward (that never parse frontmatter) would pay.
"""

from __future__ import annotations

from typing import Any

import yaml
from frontmatter.default_handlers import YAMLHandler


class Refused(yaml.YAMLError):
    """YAML that a memory file must not contain; ``line`` is 0-based inside the frontmatter."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_BaseLoader):  # type: ignore[misc]
    """Safe loader that refuses duplicate keys (Qwen's reader takes the first, YAML the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _value in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                if key_node.value in seen:
                    raise Refused(f"duplicate key '{key_node.value}'", key_node.start_mark.line)
                seen.add(key_node.value)
        result: dict[Any, Any] = super().construct_mapping(node, deep)
        return result


# Tags construct objects and anchors make alias bombs; without an anchor an alias is only an
# undefined name (a syntax problem, e.g. ``description: *Always* run tests``).
_REFUSED_TOKENS: tuple[tuple[type[yaml.Token], str], ...] = (
    (yaml.AnchorToken, "YAML anchors (&) are not allowed"),
    (yaml.TagToken, "YAML tags (!, !!) are not allowed"),
)


def _refuse_unsafe_tokens(fm: str) -> None:
    """Stop at the first anchor, alias or tag token, before any structure is built."""
    for token in yaml.scan(fm, Loader=_BaseLoader):
        for kind, message in _REFUSED_TOKENS:
            if isinstance(token, kind):
                raise Refused(message, token.start_mark.line)


class StrictYAMLHandler(YAMLHandler):
    """python-frontmatter handler: safe loader, no tags, no anchors/aliases, a mapping or bust.

    Always passed explicitly, so python-frontmatter never sniffs the format (a file starting
    with ``{`` would otherwise be parsed as JSON).
    """

    def load(self, fm: str, **kwargs: object) -> dict[Any, Any]:
        _refuse_unsafe_tokens(fm)
        data = yaml.load(fm, Loader=_StrictLoader)  # a SafeLoader subclass
        if not isinstance(data, dict):
            raise Refused("frontmatter must be a mapping of 'key: value' lines", 1)
        return data
