"""The README's promises: two set-up commands first, and a rule table that is current."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_readme_opens_with_the_two_setup_commands():
    text = README.read_text()
    first_block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first_block and text.index(first_block.group(0)) < 40
    commands = [line for line in first_block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2
    assert "pip install" in commands[0] and "kerasfit check examples/model.py" in commands[0]
    assert commands[1] == "./scripts/test.sh"
    assert (ROOT / "examples" / "model.py").is_file()
    assert "./scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_rule_table_is_current():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_readme.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_bundled_example_has_findings(kerasfit_cmd, tmp_path):
    proc = subprocess.run(
        [*kerasfit_cmd, "check", str(ROOT / "examples" / "model.py"), "--no-cache"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr
    codes = set(re.findall(r": (KF\d{3})", proc.stdout))
    assert {"KF101", "KF102"} <= codes


def test_readme_sample_output_is_the_real_output_of_the_bundled_example():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_readme
    finally:
        sys.path.pop(0)
    real = gen_readme.example_block(gen_readme.example_output())
    assert "examples/model.py:" in real and "Found " in real
    text = README.read_text()
    shown = text.split(gen_readme.EXAMPLE_START, 1)[1].split(gen_readme.EXAMPLE_END, 1)[0].strip()
    assert shown == real, "run python scripts/gen_readme.py"
    # the count in the summary is the number of lines shown
    lines = [line for line in shown.splitlines() if line.startswith("examples/model.py:")]
    assert f"Found {len(lines)} finding(s)." in shown


def test_readme_precommit_snippet_names_real_hooks_and_a_rev_that_can_exist():
    import yaml

    block = re.search(r"```yaml\n(repos:.*?)```", README.read_text(), re.S)
    assert block, "no pre-commit snippet"
    (repo,) = yaml.safe_load(block.group(1))["repos"]
    hooks = {h["id"] for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    # one hook: with both, every finding is printed twice and both fail
    (hook,) = repo["hooks"]
    assert hook["id"] in hooks
    section = README.read_text().split("## pre-commit", 1)[1].split("\n## ", 1)[0]
    assert all(f"`{h}`" in section for h in hooks)  # the other one, and when to pick it
    rev = str(repo["rev"])
    # pre-commit needs a tag that exists or a commit SHA; kerasfit has no tags yet
    tags = _git("tag").split()
    assert rev in tags or re.fullmatch(r"[0-9a-f]{40}", rev), rev
    assert "autoupdate --bleeding-edge" in README.read_text()


def _git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, f"git {' '.join(args)}: {out.stderr.strip()}"
    return out.stdout


def test_readme_precommit_rev_has_todays_hooks_file_and_checks_notebooks():
    """The revision README pins (a commit, or a release tag once there are tags) is in
    kerasfit's history — CI's clean checkout of main is a full clone — and its
    `.pre-commit-hooks.yaml` is the current one, byte for byte: a user who copies the
    example gets today's hooks, which check notebooks (issue 26, item 6). A change to the
    hooks file fails here until README names a revision that has it."""
    import yaml

    block = re.search(r"```yaml\n(repos:.*?)```", README.read_text(), re.S)
    assert block, "no pre-commit snippet"
    (repo,) = yaml.safe_load(block.group(1))["repos"]
    rev = str(repo["rev"])
    commit = subprocess.run(["git", "rev-parse", "--verify", "-q", f"{rev}^{{commit}}"], cwd=ROOT,
                            capture_output=True, text=True)
    assert commit.returncode == 0, f"README's rev {rev} is not in this clone's history (a shallow clone?)"
    sha = commit.stdout.strip()
    ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", sha, "HEAD"], cwd=ROOT)
    assert ancestor.returncode == 0, f"README's rev {rev} is not in the history of the checked-out branch"
    pinned = _git("show", f"{sha}:.pre-commit-hooks.yaml")
    assert pinned == (ROOT / ".pre-commit-hooks.yaml").read_text(), (
        f"README's rev {rev} has another .pre-commit-hooks.yaml than today's: pin a commit that has it "
        "(`git log -1 --format=%H -- .pre-commit-hooks.yaml` or any later one)"
    )
    for hook in yaml.safe_load(pinned):
        assert "jupyter" in hook["types_or"], hook["id"]




def test_license_file_is_the_one_pyproject_declares():
    import tomllib

    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the full text, not a pointer to it
