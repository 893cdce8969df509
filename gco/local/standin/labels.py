"""The stand-in API server's label selectors and label index: which stored objects carry key=value.

The real API server answers a label-selector list from its watch cache without reading every
object of the cluster from etcd; a stand-in that scanned every stored object per list would make
the local stack slower with each endpoint in a way the real system is not (at 1,000 endpoints a
scan touches ~6,000 objects per list, and a reconcile makes one list per kind and namespace).
The index narrows a selector's equality terms (`a=b`, `a==b`), set terms (`a in (b,c)`) and
absence terms (`!a`) to the candidates; the caller still matches every term on each candidate, so
the index can only make a list faster, never change its answer.

The grammar is the API server's (`k8s.io/apimachinery/pkg/labels/selector.go`, `Parse`; "Labels
and Selectors" in the Kubernetes docs): terms are separated by commas and ANDed; `a=b`, `a==b` and
`a!=b` compare (`!=` also matches an object without the label), `a in (b,c)` needs the label with
one of the values, `a` (exists) needs the label with any value, and `!a` (does not exist) needs it
absent. Not modelled: `notin`, and the value syntax checks (a malformed selector is not refused).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Hashable, Mapping
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
_SET_TERM = re.compile(r"^\s*([^\s!=]+)\s+in\s+\(([^)]*)\)\s*$")
_EXISTENCE_TERM = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


def split_terms(query: str) -> list[str]:
    """A selector's terms: commas separate terms, except inside a set term's parentheses."""
    terms: list[str] = []
    depth, start = 0, 0
    for index, char in enumerate(query):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            terms.append(query[start:index])
            start = index + 1
    terms.append(query[start:])
    return [term.strip() for term in terms if term.strip()]


def set_term(term: str) -> tuple[str, frozenset[str]] | None:
    """`key in (a,b)` as (key, {a, b}); None for any other term."""
    match = _SET_TERM.match(term)
    if match is None:
        return None
    return match.group(1), frozenset(value.strip() for value in match.group(2).split(",") if value.strip())


def existence_term(term: str) -> tuple[str, bool] | None:
    """`key` as (key, True) (the label exists), `!key` as (key, False); None for any other term."""
    match = _EXISTENCE_TERM.match(term)
    if match is None:
        return None
    return match.group(2), not match.group(1)


def equality_term(term: str) -> tuple[str, str] | None:
    """`key=value` or `key==value` as (key, value); None for `!=`, set and existence terms."""
    if "!=" in term or set_term(term) is not None or "=" not in term:
        return None
    key, _, value = term.replace("==", "=").partition("=")
    return key.strip(), value.strip()


# One parsed selector term: ("in", key, values), ("!=", key, value), ("=", key, value), or
# ("exists", key, "") / ("!exists", key, "").
Term = tuple[str, str, frozenset[str] | str]


@functools.lru_cache(maxsize=1024)
def parse_selector(query: str) -> tuple[Term, ...]:
    """A selector's terms, parsed once per selector text rather than once per object a list checks."""
    terms: list[Term] = []
    for term in split_terms(query):
        values = set_term(term)
        existence = existence_term(term)
        if values is not None:
            terms.append(("in", values[0], values[1]))
        elif existence is not None:
            terms.append(("exists" if existence[1] else "!exists", existence[0], ""))
        elif "!=" in term:
            key, value = term.split("!=", 1)
            terms.append(("!=", key, value))
        else:
            key, _, value = term.replace("==", "=").partition("=")
            terms.append(("=", key, value))
    return tuple(terms)


def matches(labels: Mapping[str, str], query: str) -> bool:
    """Whether `labels` satisfy every term of the selector `query` (equality, `!=`, `in`, `key`, `!key`)."""
    for operator, key, value in parse_selector(query):
        found = labels.get(key)
        if operator in ("exists", "!exists"):
            if (found is not None) != (operator == "exists"):
                return False
        elif operator == "in":
            if found not in value:
                return False
        elif (found == value) != (operator == "="):
            return False
    return True


class LabelIndex(Generic[Key]):
    """Object keys by label (key, value); not thread-safe: the stand-in holds its lock around it."""

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str], set[Key]] = {}
        self._labels: dict[Key, dict[str, str]] = {}
        self._with_label: dict[str, set[Key]] = {}  # label key -> the keys whose labels have it

    def put(self, key: Key, labels: Mapping[str, str]) -> None:
        """Index `key` under `labels`, replacing what it was indexed under before."""
        self.remove(key)
        self._labels[key] = dict(labels)
        for pair in labels.items():
            self._keys.setdefault(pair, set()).add(key)
            self._with_label.setdefault(pair[0], set()).add(key)

    def remove(self, key: Key) -> None:
        for pair in (self._labels.pop(key, None) or {}).items():
            keys = self._keys.get(pair)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._keys[pair]
            holders = self._with_label.get(pair[0])
            if holders is not None:
                holders.discard(key)
                if not holders:
                    del self._with_label[pair[0]]

    def candidates(self, query: str) -> set[Key] | None:
        """Keys that may match `query` (a superset of the answer), or None: the selector narrows nothing."""
        found: set[Key] | None = None
        for term in split_terms(query):
            pairs: list[tuple[str, str]] = []
            equality = equality_term(term)
            existence = existence_term(term)
            if existence is not None and not existence[1]:  # `!key`: every key indexed without it
                lacking = self._labels.keys() - self._with_label.get(existence[0], set())
                found = lacking if found is None else found & lacking
                continue
            if equality is not None:
                pairs = [equality]
            else:
                values = set_term(term)
                if values is None:
                    continue
                pairs = [(values[0], value) for value in values[1]]
            keys: set[Key] = set()
            for pair in pairs:
                keys |= self._keys.get(pair, set())
            found = keys if found is None else found & keys
        return found
