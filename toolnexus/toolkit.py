"""The public `toolkit` constructor: the pure core's toolkit plus skills found on disk."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from pyrsistent import pvector

from .core.frozen import FrozenMap
from .core.toolkit import EMPTY, register
from .skills import list_skills, skill_tool

__all__ = ["toolkit"]

SkillsDir = str | os.PathLike | Sequence[str | os.PathLike]


def toolkit(*tools: Mapping, skills_dir: SkillsDir | None = None) -> FrozenMap:
    """Return a toolkit value holding `tools` (in order).

    With `skills_dir` (a path or a list of paths), the skills found there are kept under
    "skills" and the `skill` tool that loads them is registered first.

    >>> from toolnexus import tool, tool_names
    >>> tool_names(toolkit(tool("echo", "Echo.", None, lambda a: a.get("s", ""))))
    ('echo',)
    """
    found = list_skills(skills_dir)["skills"] if skills_dir is not None else ()
    if not found:
        return register(EMPTY, *tools)
    return register(EMPTY, skill_tool(found), *tools).set("skills", pvector(found))
