"""Agent skills: discover `**/SKILL.md`, load one with the `skill` tool, list them for the prompt.

Discovery is the only I/O here: it reads every skill once into a value
{name, description, location, dir, content, files}; rendering a skill and
composing the system prompt are pure functions of those values.
"""

from __future__ import annotations

import datetime
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pyrsistent import pvector

from .core.extras import needs_extra
from .core.frozen import FrozenMap
from .core.tool import tool, tool_result

__all__ = [
    "SkillWarning",
    "list_skills",
    "parse_frontmatter",
    "render_skill",
    "skill_tool",
    "skills_prompt",
    "system_for",
]

SKILL_FILE = "SKILL.md"
SAMPLE_LIMIT = 10
PREAMBLE = (
    "Skills provide specialized instructions and workflows for specific tasks.\n"
    "Use the skill tool to load a skill when a task matches its description."
)


class SkillWarning(UserWarning):
    """A SKILL.md was skipped (malformed, nameless, unreadable or a duplicate name)."""


# ---- pure parsing ----------------------------------------------------------


def parse_frontmatter(text: str) -> tuple[dict, str]:
    """Return (frontmatter mapping, body) of a SKILL.md text; ValueError if the YAML is malformed.

    A text without a leading `---` line has empty frontmatter and is all body.

    >>> parse_frontmatter("---\\nname: a\\ndescription: >\\n  one\\n  two\\n---\\n\\n# Body\\n")
    ({'name': 'a', 'description': 'one two\\n'}, '\\n# Body\\n')
    """
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise ValueError("frontmatter has no closing '---' line")
    with needs_extra("skills (SKILL.md front matter)"):
        import yaml  # lazily: only skills need PyYAML

    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as e:
        raise ValueError(" ".join(str(e).split())) from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ValueError(f"frontmatter must be a mapping, got {type(meta).__name__}")
    return meta, "".join(lines[end + 1 :])


def _scalar(value: Any) -> str | None:
    """Return a YAML scalar as trimmed text (None for a missing or non-scalar value)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float | datetime.date):
        return str(value).strip()
    return None


def _skill(meta: Mapping, body: str, location: str, files: Iterable[str]) -> FrozenMap | None:
    """Return the skill value of parsed frontmatter, or None when it has no usable name."""
    name = _scalar(meta.get("name"))
    if not name:
        return None
    return FrozenMap(
        {
            "name": name,
            "description": _scalar(meta.get("description")) or "",
            "location": location,
            "dir": os.path.dirname(location),
            "content": body.strip(),
            "files": pvector(files),
        }
    )


def render_skill(skill: Mapping) -> str:
    """Return what the `skill` tool hands the model for `skill` (the contract's exact layout)."""
    files = "\n".join(f"<file>{f}</file>" for f in skill["files"])
    return (
        f'<skill_content name="{skill["name"]}">\n'
        f"# Skill: {skill['name']}\n\n"
        f"{skill['content']}\n\n"
        f"Base directory for this skill: {Path(skill['dir']).as_uri()}\n"
        "Relative paths in this skill (e.g., scripts/, reference/) are relative to this "
        "base directory.\n"
        "Note: file list is sampled.\n\n"
        f"<skill_files>\n{files}\n</skill_files>\n"
        "</skill_content>"
    )


def skills_prompt(tk: Mapping | None) -> str:
    """Return the skills catalog for the system prompt ("" when no skill has a description).

    `tk` is a toolkit (or anything with a "skills" sequence, like `list_skills`'s result).

    >>> skills_prompt({"skills": [{"name": "b", "description": "Bee."},
    ...                           {"name": "a", "description": "Ay."}]}).splitlines()[-2:]
    ['- **a**: Ay.', '- **b**: Bee.']
    """
    described = sorted(
        (s for s in ((tk or {}).get("skills") or ()) if s.get("description")),
        key=lambda s: s["name"],
    )
    if not described:
        return ""
    lines = "\n".join(f"- **{s['name']}**: {s['description']}" for s in described)
    return f"{PREAMBLE}\n\n## Available Skills\n{lines}"


def system_for(system_prompt: str | None, tk: Mapping | None) -> str:
    """Return the system text of a run: the system prompt and the skills catalog, non-empty parts.

    >>> system_for("Be brief.", None), system_for("", None)
    ('Be brief.', '')
    """
    if not tk or not tk.get("skills"):  # the common case costs one lookup per run
        return system_prompt or ""
    return "\n\n".join(p for p in (system_prompt, skills_prompt(tk)) if p)


# ---- discovery (the I/O edge) ----------------------------------------------


def _files(root: str, seen: set[str]) -> Iterator[str]:
    """Yield every file under root, depth first in name order, following symlinked dirs.

    A directory whose real path was already visited is skipped, so symlink cycles end
    and a tree linked twice is read once.
    """
    real = os.path.realpath(root)
    if real in seen:
        return
    seen.add(real)
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:  # an unreadable directory hides its files; discovery goes on
        return
    subdirs = []
    for e in entries:
        try:
            if e.is_dir():  # follows symlinks
                subdirs.append(e.path)
            elif e.is_file():
                yield e.path
        except OSError:
            continue
    for d in subdirs:
        yield from _files(d, seen)


def _roots(dirs: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str]:
    items = [dirs] if isinstance(dirs, str | os.PathLike) else list(dirs)
    roots = [os.path.abspath(os.fspath(d)) for d in items]
    for r in roots:
        if not os.path.isdir(r):
            raise ValueError(f"skills directory {r!r} does not exist or is not a directory")
    return roots


def _sample(skill_md: str, all_files: list[str]) -> list[str]:
    prefix = os.path.dirname(skill_md) + os.sep
    return sorted(
        f for f in all_files if f.startswith(prefix) and not f.endswith(os.sep + SKILL_FILE)
    )[:SAMPLE_LIMIT]


def _skip(location: str, reason: str, detail: str, warn: bool = True) -> FrozenMap:
    if warn:
        warnings.warn(f"skipping {location}: {reason} ({detail})", SkillWarning, stacklevel=3)
    return FrozenMap({"location": location, "reason": reason, "detail": detail})


def list_skills(dirs: str | os.PathLike | Iterable[str | os.PathLike]) -> FrozenMap:
    """Return {"skills", "skipped"} found under `dirs` (each a tuple, in discovery order).

    Every `**/SKILL.md` is read (symlinked directories followed, cycles guarded). A skip
    carries its `reason`: missing-name, malformed-frontmatter, duplicate-name or unreadable,
    and is reported once as a SkillWarning. The first skill of a name wins.
    """
    seen: set[str] = set()
    all_files = [f for root in _roots(dirs) for f in _files(root, seen)]
    skills: dict[str, FrozenMap] = {}
    skipped: list[FrozenMap] = []
    warned: set[str] = set()  # a duplicate name is reported once, however many copies
    for location in (f for f in all_files if os.path.basename(f) == SKILL_FILE):
        try:
            text = Path(location).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            skipped.append(_skip(location, "unreadable", f"{type(e).__name__}: {e}"))
            continue
        try:
            meta, body = parse_frontmatter(text)
        except ValueError as e:
            skipped.append(_skip(location, "malformed-frontmatter", str(e)))
            continue
        skill = _skill(meta, body, location, _sample(location, all_files))
        if skill is None:
            skipped.append(_skip(location, "missing-name", "frontmatter has no 'name'"))
        elif skill["name"] in skills:
            name = skill["name"]
            detail = f"{name!r} already defined by {skills[name]['location']}"
            skipped.append(_skip(location, "duplicate-name", detail, warn=name not in warned))
            warned.add(name)
        else:
            skills[skill["name"]] = skill
    return FrozenMap({"skills": tuple(skills.values()), "skipped": tuple(skipped)})


# ---- the tool ----------------------------------------------------------------

_DESCRIPTION = (
    "Load a skill: its full instructions and the files that come with it. Call it when the "
    "task at hand matches one of the skills listed in the system prompt; the result adds the "
    "skill's workflow and the paths of its scripts and references to this conversation."
)


def skill_tool(skills: Iterable[Mapping]) -> FrozenMap:
    """Return the `skill` tool over `skills` (input {name}; an unknown name is an error result)."""
    by_name = {s["name"]: s for s in skills}
    available = ", ".join(sorted(by_name)) or "(none)"

    def execute(args: Mapping):
        name = args.get("name")
        skill = by_name.get(name) if isinstance(name, str) else None
        if skill is None:
            return tool_result(f'Skill "{name}" not found. Available: {available}', True)
        return tool_result(render_skill(skill), metadata={"name": name, "dir": skill["dir"]})

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The name of the skill to load"}},
        "required": ["name"],
    }
    return tool(
        "skill", f"{_DESCRIPTION}\nAvailable skills: {available}.", schema, execute, "skill"
    )
