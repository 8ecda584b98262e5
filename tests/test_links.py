"""Rule links open from a user's project (a directory that is not this repository): every
format names the installed page as a file:// URI, or the same page under a team's
docs-url; `kerasfit explain facts` prints the facts the messages cite."""

from __future__ import annotations

import re

import pytest

from kfhelpers import BAD, ROOT, installed_page, run, write

PAGE = (ROOT / "docs" / "rules" / "KF101.md").read_text(encoding="utf-8")
FACTS = (ROOT / "docs" / "facts.md").read_text(encoding="utf-8")


def _links(project, *extra: str) -> dict[str, list[str]]:
    """Each format's KF101 links, from a check run in ``project``."""
    out: dict[str, list[str]] = {}
    r = run("check", "model.py", "--no-cache", "--output-format", "json", *extra, cwd=project)
    assert r.returncode == 1, r
    out["json"] = [d["url"] for d in r.json() if d["code"] == "KF101"]
    r = run("check", "model.py", "--no-cache", "--output-format", "sarif", *extra, cwd=project)
    rules = r.json()["runs"][0]["tool"]["driver"]["rules"]
    out["sarif"] = [x["helpUri"] for x in rules if x["id"] == "KF101"]
    out["sarif help"] = [re.search(r"Rule page: (\S+)", x["help"]["text"]).group(1) for x in rules if x["id"] == "KF101"]
    r = run("check", "model.py", "--no-cache", "--output-format", "lsp", *extra, cwd=project)
    out["lsp"] = [d["codeDescription"]["href"] for ds in r.json().values() for d in ds if d["code"] == "KF101"]
    return out


def test_every_format_links_to_the_installed_page_from_another_project(tmp_path):
    project = tmp_path / "project"
    write(project / "model.py", BAD)
    links = _links(project)
    for fmt, urls in links.items():
        assert urls, fmt
        for url in urls:
            assert url.startswith("file://"), (fmt, url)
            assert installed_page(url).read_text(encoding="utf-8") == PAGE, (fmt, url)
    # the engine's codes have no page: no link rather than one that points nowhere
    write(project / "broken.py", "import tensorflow as tf\ndef f(:\n")
    r = run("check", "broken.py", "--no-cache", "--output-format", "json", cwd=project)
    assert [d["url"] for d in r.json()] == [None]


def test_docs_url_from_the_project_config_and_from_the_command_line(tmp_path):
    project = tmp_path / "project"
    write(project / "src" / "model.py", BAD)
    write(project / "pyproject.toml", '[tool.kerasfit]\ndocs-url = "https://docs.example.com/kerasfit/"\n')
    links = _links(project / "src")  # the config is found above the directory the check runs in
    for fmt, urls in links.items():
        assert urls == ["https://docs.example.com/kerasfit/rules/KF101.md"] * len(urls) and urls, fmt
    links = _links(project / "src", "--docs-url", "https://intranet.example/kf")
    for fmt, urls in links.items():
        assert urls and set(urls) == {"https://intranet.example/kf/rules/KF101.md"}, fmt


@pytest.mark.parametrize("where", ["config", "option"])
def test_a_docs_url_that_is_not_an_absolute_url_is_one_line(tmp_path, where):
    write(tmp_path / "model.py", BAD)
    if where == "config":
        write(tmp_path / "pyproject.toml", '[tool.kerasfit]\ndocs-url = "docs/"\n')
        r = run("check", "model.py", "--no-cache", cwd=tmp_path)
    else:
        r = run("check", "model.py", "--no-cache", "--docs-url", "docs/", cwd=tmp_path)
    assert r.returncode == 2, r
    (line,) = r.stderr.splitlines()
    assert "docs-url must be an absolute URL" in line and "'docs/'" in line
    if where == "config":
        assert "pyproject.toml" in line


def test_rules_list_links_to_the_installed_pages(tmp_path):
    r = run("rules", "--output-format", "json", cwd=tmp_path)
    rows = {row["code"]: row["url"] for row in r.json()}
    assert installed_page(rows["KF101"]).read_text(encoding="utf-8") == PAGE
    write(tmp_path / "pyproject.toml", '[tool.kerasfit]\ndocs-url = "https://docs.example.com/kf/"\n')
    r = run("rules", "--output-format", "json", cwd=tmp_path)
    assert {row["code"]: row["url"] for row in r.json()}["KF101"] == "https://docs.example.com/kf/rules/KF101.md"


def test_explain_facts_prints_the_facts_and_one_fact(tmp_path):
    r = run("explain", "facts", cwd=tmp_path)
    assert r.returncode == 0, r
    assert r.stdout == FACTS
    # the spelling the messages cite works as well
    for topic in ("facts#11", "docs/facts.md#11", "facts.md#11"):
        r = run("explain", topic, cwd=tmp_path)
        assert r.returncode == 0, (topic, r)
        assert r.stdout.startswith("### 11. "), r.stdout
        assert r.stdout.strip() in FACTS and "### 12." not in r.stdout and "<a id" not in r.stdout
    n = len(re.findall(r"^### \d+\. ", FACTS, re.M))
    last = run("explain", f"facts#{n}", cwd=tmp_path)
    assert last.stdout.startswith(f"### {n}. ") and last.stdout.strip() in FACTS
    r = run("explain", "facts#99", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.splitlines() == [f"kerasfit: error: no fact '99' in docs/facts.md (facts 1–{n})"]
