"""Skills over real directories: discovery, the skill tool, the prompt, the system it reaches."""

import os
import warnings
from pathlib import Path

import pytest
from dialect_kit import STYLES, declared_tools, sent
from hypothesis import given, settings
from hypothesis import strategies as st

from toolnexus import (
    create_client,
    execute,
    list_skills,
    run,
    skills_prompt,
    to_anthropic,
    tool_names,
    toolkit,
)
from toolnexus.skills import (
    PREAMBLE,
    SkillWarning,
    parse_frontmatter,
    render_skill,
    skill_tool,
    system_for,
)
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply


def write_skill(root: Path, rel: str, front: str, body: str = "Do the thing.\n") -> Path:
    d = root / rel
    d.mkdir(parents=True, exist_ok=True)
    (d / "SKILL.md").write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    return d


def quiet_list(dirs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = list_skills(dirs)
    return found, [str(w.message) for w in caught if issubclass(w.category, SkillWarning)]


def names(found):
    return [s["name"] for s in found["skills"]]


# ---- discovery ----------------------------------------------------------------


def test_discovers_nested_skills_with_trimmed_scalars(tmp_path):
    write_skill(tmp_path, "a", "name: '  alpha  '\ndescription: First one.\n")
    write_skill(tmp_path, "deep/er/b", "name: beta\n")
    found, warned = quiet_list(tmp_path)
    assert names(found) == ["alpha", "beta"] and found["skipped"] == () and warned == []
    alpha, beta = found["skills"]
    assert alpha["description"] == "First one." and beta["description"] == ""
    assert alpha["location"] == str(tmp_path / "a" / "SKILL.md")
    assert alpha["dir"] == str(tmp_path / "a") and alpha["content"] == "Do the thing."


def test_folded_and_literal_scalars_are_parsed_by_a_real_yaml_parser(tmp_path):
    front = "name: >\n  folded\n  name\ndescription: |\n  line one\n  line two\n\nextra: [1, 2]\n"
    write_skill(tmp_path, "s", front)
    (skill,) = quiet_list(tmp_path)[0]["skills"]
    assert skill["name"] == "folded name"
    assert skill["description"] == "line one\nline two"  # literal kept, trailing newlines trimmed


def test_non_string_scalars_become_text(tmp_path):
    write_skill(tmp_path, "n", "name: 42\ndescription: true\n")
    (skill,) = quiet_list(tmp_path)[0]["skills"]
    assert (skill["name"], skill["description"]) == ("42", "true")


def test_skips_carry_reasons_and_never_break_discovery(tmp_path):
    write_skill(tmp_path, "1-good", "name: good\ndescription: Fine.\n")
    write_skill(tmp_path, "2-nameless", "description: no name here\n")
    write_skill(tmp_path, "3-malformed", "name: [unclosed\n")
    write_skill(tmp_path, "4-dup", "name: good\n")
    write_skill(tmp_path, "5-dup-again", "name: good\n")
    write_skill(tmp_path, "6-list", "- just\n- a list\n")
    (tmp_path / "7-binary").mkdir()
    (tmp_path / "7-binary" / "SKILL.md").write_bytes(b"---\nname: \xff\xfe\n---\n")
    (tmp_path / "8-unclosed").mkdir()
    (tmp_path / "8-unclosed" / "SKILL.md").write_text("---\nname: x\nno end\n")
    (tmp_path / "9-plain").mkdir()
    (tmp_path / "9-plain" / "SKILL.md").write_text("# Just markdown, no frontmatter\n")
    found, warned = quiet_list(tmp_path)
    assert names(found) == ["good"]
    reasons = {Path(s["location"]).parent.name: s["reason"] for s in found["skipped"]}
    assert reasons == {
        "2-nameless": "missing-name",
        "3-malformed": "malformed-frontmatter",
        "4-dup": "duplicate-name",
        "5-dup-again": "duplicate-name",
        "6-list": "malformed-frontmatter",
        "7-binary": "unreadable",
        "8-unclosed": "malformed-frontmatter",
        "9-plain": "missing-name",
    }
    # one warning per skip, except that a duplicated name is reported once
    assert len(warned) == len(reasons) - 1
    assert sum("duplicate-name" in w for w in warned) == 1
    assert found["skills"][0]["location"] == str(tmp_path / "1-good" / "SKILL.md")  # first wins


def test_follows_symlinked_directories_and_files_and_survives_cycles(tmp_path):
    outside = tmp_path / "outside"
    write_skill(outside, "linked", "name: linked\n")
    (outside / "linked" / "scripts").mkdir()
    (outside / "linked" / "scripts" / "run.sh").write_text("echo hi\n")
    root = tmp_path / "root"
    write_skill(root, "home", "name: home\n")
    os.symlink(outside / "linked", root / "via-link")
    os.symlink(root, root / "home" / "loop")  # a cycle back to the root
    os.symlink(root / "home", root / "zz-second-path")  # the same tree, reached twice
    (root / "filelinked").mkdir()
    os.symlink(
        write_skill(tmp_path, "lone", "name: lone\n") / "SKILL.md", root / "filelinked" / "SKILL.md"
    )
    found, warned = quiet_list(root)
    assert sorted(names(found)) == ["home", "linked", "lone"] and warned == []
    linked = next(s for s in found["skills"] if s["name"] == "linked")
    assert linked["dir"] == str(root / "via-link")  # the path as found, not resolved
    assert list(linked["files"]) == [str(root / "via-link" / "scripts" / "run.sh")]


def test_several_roots_first_root_wins(tmp_path):
    write_skill(tmp_path / "one", "x", "name: same\ndescription: from one\n")
    write_skill(tmp_path / "two", "x", "name: same\ndescription: from two\n")
    found, _ = quiet_list([tmp_path / "one", str(tmp_path / "two")])
    assert [s["description"] for s in found["skills"]] == ["from one"]
    assert [s["reason"] for s in found["skipped"]] == ["duplicate-name"]


def test_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        list_skills(tmp_path / "nope")


def test_list_skills_warns_through_the_warnings_module(tmp_path):
    write_skill(tmp_path, "bad", "name: [\n")
    with pytest.warns(SkillWarning, match="malformed-frontmatter"):
        list_skills(tmp_path)


# ---- the skill tool ---------------------------------------------------------------


def test_skill_tool_output_is_byte_exact(tmp_path):
    d = write_skill(
        tmp_path, "my skill", "name: pdf\ndescription: PDFs.\n", "\n\n  # PDF\n\nUse it.\n\n"
    )
    for i in range(12):
        (d / "reference").mkdir(exist_ok=True)
        (d / "reference" / f"f{i:02}.md").write_text("x")
    (d / "a.sh").write_text("x")
    tk = toolkit(skills_dir=tmp_path)
    assert tool_names(tk) == ("skill",)
    r = execute(tk, "skill", {"name": "pdf"})
    files = [str(d / "a.sh")] + [str(d / "reference" / f"f{i:02}.md") for i in range(9)]
    expected = (
        '<skill_content name="pdf">\n# Skill: pdf\n\n# PDF\n\nUse it.\n\n'
        f"Base directory for this skill: file://{tmp_path}/my%20skill\n"
        "Relative paths in this skill (e.g., scripts/, reference/) are relative to this base "
        "directory.\nNote: file list is sampled.\n\n<skill_files>\n"
        + "".join(f"<file>{f}</file>\n" for f in files)
        + "</skill_files>\n</skill_content>"
    )
    assert r["output"] == expected and r["is_error"] is False
    assert r["metadata"]["name"] == "pdf"


def test_skill_without_files_has_an_empty_file_block(tmp_path):
    write_skill(tmp_path, "s", "name: s\n", "Body")
    out = execute(toolkit(skills_dir=tmp_path), "skill", {"name": "s"})["output"]
    assert out.endswith(
        "Note: file list is sampled.\n\n<skill_files>\n\n</skill_files>\n</skill_content>"
    )


def test_unknown_skill_is_an_error_result_listing_the_available(tmp_path):
    write_skill(tmp_path, "b", "name: beta\n")
    write_skill(tmp_path, "a", "name: alpha\n")
    tk = toolkit(skills_dir=tmp_path)
    r = execute(tk, "skill", {"name": "gamma"})
    assert r["is_error"] and r["output"] == 'Skill "gamma" not found. Available: alpha, beta'
    assert execute(tk, "skill", {})["is_error"]
    schema = to_anthropic(tk)[0]["input_schema"]
    assert schema["required"] == ["name"] and schema["properties"]["name"]["type"] == "string"


def test_toolkit_keeps_its_shape_with_and_without_skills(tmp_path):
    from toolnexus import define_tool

    @define_tool
    def echo(s: str) -> str:
        """Echo."""
        return s

    (tmp_path / "empty").mkdir()
    assert toolkit(echo, skills_dir=tmp_path / "empty") == toolkit(echo)
    write_skill(tmp_path / "full", "x", "name: x\n")
    tk = toolkit(echo, skills_dir=tmp_path / "full")
    assert tool_names(tk) == ("skill", "echo") and [s["name"] for s in tk["skills"]] == ["x"]
    assert set(tk) == {"tools", "index", "skills", "native", "wire", "wire_json"}
    with pytest.raises(ValueError, match="duplicate tool name 'skill'"):
        toolkit(skill_tool([]), skills_dir=tmp_path / "full")


# ---- the prompt -------------------------------------------------------------------


def test_skills_prompt_lists_described_skills_sorted(tmp_path):
    write_skill(tmp_path, "1", "name: zeta\ndescription: Last.\n")
    write_skill(tmp_path, "2", "name: alpha\ndescription: >\n  First,\n  folded.\n")
    write_skill(tmp_path, "3", "name: mute\n")
    tk = toolkit(skills_dir=tmp_path)
    assert skills_prompt(tk) == (
        "Skills provide specialized instructions and workflows for specific tasks.\n"
        "Use the skill tool to load a skill when a task matches its description.\n\n"
        "## Available Skills\n- **alpha**: First, folded.\n- **zeta**: Last."
    )
    assert skills_prompt(list_skills(tmp_path)) == skills_prompt(tk)


def test_skills_prompt_is_empty_without_descriptions(tmp_path):
    write_skill(tmp_path, "1", "name: mute\n")
    assert skills_prompt(toolkit(skills_dir=tmp_path)) == ""
    assert skills_prompt(toolkit()) == "" and skills_prompt(None) == ""


skill_values = st.builds(
    lambda n, d: {"name": n, "description": d},
    st.text(min_size=1, max_size=8),
    st.text(max_size=12).map(str.strip),
)


@given(st.lists(skill_values, max_size=6), st.text(max_size=20))
def test_system_for_joins_the_non_empty_parts(skills, system):
    tk = {"skills": skills}
    catalog = skills_prompt(tk)
    parts = [p for p in (system, catalog) if p]
    assert system_for(system, tk) == "\n\n".join(parts)
    assert (catalog == "") == (not any(s["description"] for s in skills))
    if catalog:
        assert catalog.startswith(PREAMBLE + "\n\n## Available Skills\n")
        listed = [line for line in catalog.split("\n- **")[1:]]
        assert len(listed) == sum(1 for s in skills if s["description"])


@settings(max_examples=40)
@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60),
    st.lists(st.text(alphabet="abc/", min_size=1, max_size=6), max_size=12),
)
def test_render_skill_shape(body, files):
    skill = {"name": "n", "content": body.strip(), "dir": "/abs/d", "files": files}
    out = render_skill(skill)
    assert out.startswith('<skill_content name="n">\n# Skill: n\n\n' + body.strip() + "\n\n")
    assert "\nBase directory for this skill: file:///abs/d\n" in out
    assert out.endswith("\n</skill_files>\n</skill_content>")
    assert out.count("<file>") == len(files)


def test_parse_frontmatter_keeps_the_body_verbatim():
    meta, body = parse_frontmatter("---\nname: x\n---\nline\n---\nmore\n")
    assert meta == {"name": "x"} and body == "line\n---\nmore\n"
    assert parse_frontmatter("no fence") == ({}, "no fence")
    with pytest.raises(ValueError):
        parse_frontmatter("---\n: : :\n  - bad\n---\n")


# ---- end to end: the system prompt reaches the request ------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_skills_reach_the_request_and_the_model_loads_one(tmp_path, style):
    write_skill(tmp_path, "greet", "name: greet\ndescription: Greets people.\n", "Say hello.\n")
    tk = toolkit(skills_dir=tmp_path)
    script = [tool_calls_reply(("skill", {"name": "greet"})), text_reply("hello!")]
    with fake_provider(script) as fp:
        client = create_client(base_url=fp.url, style=style, model="m", api_key="k",
                               system_prompt="Be kind.")  # fmt: skip
        r = run(client, "hi", toolkit=tk)
    expected = "Be kind.\n\n" + skills_prompt(tk)
    first = fp.requests[0]["body"]
    assert sent(first)[0] == ("system", expected)
    assert declared_tools(first) == ["skill"] and r["text"] == "hello!"
    assert r["tool_calls"][0]["output"].startswith('<skill_content name="greet">')
    assert "Say hello." in r["tool_calls"][0]["output"]


@pytest.mark.parametrize("style", STYLES)
def test_no_skills_no_system_means_no_system_in_the_request(tmp_path, style):
    write_skill(tmp_path, "mute", "name: mute\n")
    with fake_provider([text_reply("ok")]) as fp:
        client = create_client(base_url=fp.url, style=style, model="m", api_key="k")
        run(client, "hi", toolkit=toolkit(skills_dir=tmp_path))
    body = fp.requests[0]["body"]
    assert [i[0] for i in sent(body)] == ["user"]
