"""Name matching for what a user types: case-insensitive, and a wrong name answered with the nearest."""

from __future__ import annotations

import difflib
from typing import Iterable


class UnknownNameError(ValueError):
    """"unknown model 'x'; did you mean a, b or c?"; `hint` is the part after the semicolon."""

    def __init__(self, kind: str, given: str, hint: str) -> None:
        super().__init__(f"unknown {kind} {given!r}; {hint}")
        self.hint = hint


def resolve_name(kind: str, given: str, known: Iterable[str]) -> str:
    """The known name that `given` names, ignoring case; else UnknownNameError naming the nearest."""
    by_lower = {k.lower(): k for k in known}
    key = given.strip().lower()
    if key in by_lower:
        return by_lower[key]
    if not key:  # an empty name is no misspelling of the nearest
        raise UnknownNameError(kind, given, f"the {kind} name is empty")
    near = difflib.get_close_matches(key, by_lower, n=3, cutoff=0.6) or \
        difflib.get_close_matches(key, by_lower, n=3, cutoff=0.0)
    names = [by_lower[n] for n in near]
    if not names:
        raise UnknownNameError(kind, given, f"no {kind} is known yet")
    choice = " or ".join(filter(None, [", ".join(names[:-1]), names[-1]]))
    raise UnknownNameError(kind, given, f"did you mean {choice}?")
