"""Strings that match a regular expression, built from its parse tree: the shortest, or one of a given length.

Deterministic (the same pattern gives the same strings), for tests that need values a schema's
`pattern` accepts. Lookarounds are not solved: a candidate is checked against the whole pattern and
the next character preference tried until one matches.
"""

from __future__ import annotations

import functools
import re
import string

try:  # Python 3.11+
    from re import _constants as sre  # type: ignore[attr-defined]
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover
    import sre_constants as sre  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

# Characters tried, in order, for a class or `.`: plain letters first, so lookaheads such as
# (?!aws:) or (?!.*:latest$) are rarely in the way.
PREFERENCES = ("a0bA1-._/:", "b1cB2_.-:/", "z9Z8y7x", string.printable)
CAP = 300  # longest string considered (the schema has no pattern with a longer maxLength)


def examples(pattern: str, lengths: tuple[int | None, ...] = (None,)) -> list[str]:
    """A match of `pattern` (anchored or not, matched whole) for each length in `lengths` (None: the shortest);
    lengths the pattern cannot match are skipped."""
    out = []
    for length in lengths:
        found = example(pattern, length)
        if found is not None and found not in out:
            out.append(found)
    return out


def example(pattern: str, length: int | None = None) -> str | None:
    tree = _tree(pattern)
    possible = _lengths(tree, CAP)
    if length is None:
        length = min(possible, default=None)
    if length is None or length not in possible:
        return None
    whole = re.compile(pattern)
    for preference in PREFERENCES:
        text = _build(tree, length, preference)
        if whole.fullmatch(text):
            return text
    return None


@functools.cache
def _tree(pattern: str) -> tuple:
    return _freeze(sre_parse.parse(pattern))


def _freeze(node):
    if isinstance(node, (list, tuple)) or type(node).__name__ == "SubPattern":
        return tuple(_freeze(x) for x in node)
    return node


@functools.cache
def _item_lengths(op, av, cap: int) -> frozenset[int]:
    if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN, sre.CATEGORY):
        return frozenset({1})
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return frozenset({0})
    if op is sre.SUBPATTERN:
        return _lengths(av[-1], cap)
    if op is sre.BRANCH:
        return frozenset().union(*(_lengths(b, cap) for b in av[1]))
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)):
        low, high, body = av
        one = _lengths(body, cap)
        reach, out = frozenset({0}), set()
        for count in range(0, min(high, cap) + 1):
            if count >= low:
                out |= reach
            reach = frozenset(a + b for a in reach for b in one if a + b <= cap)
            if not reach or (count >= low and reach <= out):
                break
        return frozenset(out)
    if op is getattr(sre, "ATOMIC_GROUP", None):
        return _lengths(av, cap)
    raise NotImplementedError(f"regex construct {op}")


@functools.cache
def _lengths(seq: tuple, cap: int) -> frozenset[int]:
    reach = frozenset({0})
    for op, av in seq:
        item = _item_lengths(op, av, cap)
        reach = frozenset(a + b for a in reach for b in item if a + b <= cap)
    return reach


@functools.cache
def _suffixes(seq: tuple) -> list[frozenset[int]]:
    """The lengths reachable from item i of `seq` onwards, for each i: to split a length between the items."""
    suffix = [frozenset({0})]
    for op, av in reversed(seq):
        item = _item_lengths(op, av, CAP)
        suffix.insert(0, frozenset(a + b for a in suffix[0] for b in item if a + b <= CAP))
    return suffix


def _build(seq: tuple, length: int, preference: str) -> str:
    items, suffix = list(seq), _suffixes(seq)
    out, left = [], length
    for i, (op, av) in enumerate(items):
        for n in sorted(_item_lengths(op, av, CAP)):
            if left - n in suffix[i + 1]:
                out.append(_build_item(op, av, n, preference))
                left -= n
                break
    return "".join(out)


def _build_item(op, av, length: int, preference: str) -> str:
    if op is sre.LITERAL:
        return chr(av)
    if op is sre.NOT_LITERAL:
        return next(c for c in preference + string.printable if c != chr(av))
    if op is sre.ANY:
        return preference[0]
    if op is sre.CATEGORY:
        return _pick(lambda c: re.fullmatch(_category_regex(av), c) is not None, preference)
    if op is sre.IN:
        return _pick(lambda c: _in_class(av, c), preference)
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return ""
    if op is sre.SUBPATTERN:
        return _build(av[-1], length, preference)
    if op is sre.BRANCH:
        branch = next(b for b in av[1] if length in _lengths(b, CAP))
        return _build(branch, length, preference)
    if op is getattr(sre, "ATOMIC_GROUP", None):
        return _build(av, length, preference)
    low, high, body = av  # a repeat: the fewest copies that make `length`
    one = _lengths(body, CAP)
    for count in range(low, min(high, CAP) + 1):
        split = _split(one, count, length)
        if split is not None:
            return "".join(_build(body, n, preference) for n in split)
    raise AssertionError("unreachable length")


def _split(one: frozenset[int], count: int, length: int) -> list[int] | None:
    """`count` lengths from `one` summing to `length` (greedy, longest first), or None."""
    if count == 0:
        return [] if length == 0 else None
    for n in sorted(one, reverse=True):
        if n <= length:
            rest = _split(one, count - 1, length - n)
            if rest is not None:
                return [n, *rest]
    return None


def _category_regex(category) -> str:
    return {sre.CATEGORY_DIGIT: r"\d", sre.CATEGORY_NOT_DIGIT: r"\D", sre.CATEGORY_WORD: r"\w",
            sre.CATEGORY_NOT_WORD: r"\W", sre.CATEGORY_SPACE: r"\s", sre.CATEGORY_NOT_SPACE: r"\S"}[category]


def _in_class(items, char: str) -> bool:
    negate = False
    hit = False
    for op, av in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            hit |= ord(char) == av
        elif op is sre.RANGE:
            hit |= av[0] <= ord(char) <= av[1]
        elif op is sre.CATEGORY:
            hit |= re.fullmatch(_category_regex(av), char) is not None
    return hit != negate


def _pick(accepts, preference: str) -> str:
    for char in preference + string.printable:
        if accepts(char):
            return char
    raise AssertionError("no character fits the class")
