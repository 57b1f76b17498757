"""A snapshot's `changes_made` text as the reference writes it (comma-separated `kind:value` tokens: names
double-quoted with "" escapes, ids as integers), parsed for the conflict rules, the state advance and change feeds."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r'([a-z_]+):((?:"(?:[^"]|"")*"(?:\."(?:[^"]|"")*")?)|[0-9]+)')


@dataclass
class OtherChanges:
    """Parsed changes_made of the snapshots committed since this transaction's base snapshot."""

    ids: dict[str, set[int]] = field(default_factory=dict)
    names: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)

    def has(self, kind: str, value: int) -> bool:
        return value in self.ids.get(kind, set())


def parse_changes(text: str) -> OtherChanges:
    """Parse comma-separated change tokens (names double-quoted with "" escapes, ids as integers)."""
    out = OtherChanges()
    for kind, value in _TOKEN.findall(text or ""):
        if value.startswith('"'):
            names = tuple(p.replace('""', '"') for p in re.findall(r'"((?:[^"]|"")*)"', value))
            out.names.setdefault(kind, set()).add(names)
        else:
            out.ids.setdefault(kind, set()).add(int(value))
    return out


def unparsed(text: str) -> str:
    """What is left of a changes_made text once its tokens and separating commas are taken out ("" when all of it
    parses)."""
    return _TOKEN.sub("", text or "").replace(",", "").strip()
