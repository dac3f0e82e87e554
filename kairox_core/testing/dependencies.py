"""What installing a distribution brings, read from the installed metadata: the framework
adapters' tests check that one adapter never pulls another's framework."""

from __future__ import annotations

import re
from importlib import metadata

from packaging.requirements import Requirement


def runtime_closure(dist: str) -> set[str]:
    """Every distribution ``dist`` needs installed at run time (no extras, markers for
    this platform), transitively, as normalised names (``llama-index-core``)."""
    seen: set[str] = set()
    todo = [dist]
    while todo:
        current = todo.pop()
        key = re.sub(r"[-_.]+", "-", current).lower()
        if key in seen:
            continue
        seen.add(key)
        for line in metadata.requires(current) or []:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                metadata.distribution(req.name)
            except metadata.PackageNotFoundError:
                continue  # optional on this platform
            todo.append(req.name)
    return seen
