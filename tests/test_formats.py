"""Output formats: json, sarif (validated against the real SARIF 2.1.0 schema), github, lsp."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from kfhelpers import BAD, NOFIX, ROOT, finding_lines, installed_page, run, write

from kerasfit.project import reporters
from kerasfit.engine.registry import all_rules
from kerasfit.core.types import Applicability, Diagnostic, Edit, FileResult, Fix, Severity

# The OASIS SARIF 2.1.0 JSON schema, vendored as test data (tests/data/README.md says where
# it comes from) so no test reaches the network.
SCHEMA = Path(__file__).resolve().parent / "data" / "sarif-2.1.0.json"


@pytest.fixture(scope="session")
def sarif_schema() -> dict:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert "draft-04" in schema.get("$schema", ""), "expected the draft-04 SARIF 2.1.0 schema"
    return schema


@pytest.fixture
def project(tmp_path):
    write(tmp_path / "model.py", BAD + NOFIX)
    write(tmp_path / "broken.py", "import tensorflow as tf\ndef f(:\n    pass\n")
    return tmp_path


# ---- json -----------------------------------------------------------------------------------


def test_json_objects(project):
    r = run("check", "model.py", "broken.py", "--output-format", "json", "--no-cache", cwd=project)
    assert r.returncode == 1
    out = r.json()
    assert isinstance(out, list) and len(out) == 3
    for d in out:
        assert {"code", "name", "message", "severity", "filename", "location", "end_location", "fix", "url"} <= set(d)
        assert set(d["location"]) == {"row", "column"} and set(d["end_location"]) == {"row", "column"}
        assert d["severity"] in ("error", "warning", "info")
        # the installed page as a file:// URI, or nothing (the engine's own codes have no page)
        assert d["url"] is None if d["code"].startswith("KF0") else installed_page(d["url"]).is_file(), d["url"]
    syntax, fixable, nofix = out
    assert (syntax["code"], syntax["name"], syntax["severity"], syntax["filename"]) == ("KF001", "syntax-error", "error", "broken.py")
    assert syntax["fix"] is None and syntax["location"]["row"] == 2
    assert fixable["code"] == "KF101" and fixable["name"] == "unfused-batchnorm"
    assert fixable["location"] == {"row": 2, "column": 6} and fixable["end_location"]["row"] == 2
    assert installed_page(fixable["url"]).read_text() == (ROOT / "docs/rules/KF101.md").read_text()
    fix = fixable["fix"]
    assert fix["applicability"] == "safe" and fix["message"]
    assert fix["edits"] == [{"content": "True", "location": {"row": 2, "column": 44}, "end_location": {"row": 2, "column": 49}}]
    assert nofix["fix"] is None and nofix["location"]["row"] == 4
    # what each message was rendered from: the finding's kind and typed fields
    assert "finding" not in syntax
    assert (fixable["finding"], fixable["fields"]) == ("FusedFalse", {"not_fixed": None})
    assert (nofix["finding"], nofix["fields"]) == ("UnfusedOp", {"op": "tf.nn.batch_normalization"})


def test_json_clean_is_empty_list(tmp_path):
    write(tmp_path / "ok.py", "import tensorflow as tf\n")
    r = run("check", "ok.py", "--output-format", "json", cwd=tmp_path)
    assert r.returncode == 0 and r.json() == []


def test_json_edit_columns_apply_to_the_file(project):
    """Edits use 1-based columns over characters: applying them reproduces --fix."""
    r = run("check", "model.py", "--output-format", "json", "--no-cache", cwd=project)
    lines = (project / "model.py").read_text().splitlines(keepends=True)
    for d in r.json():
        for e in (d["fix"] or {}).get("edits", []):
            (r0, c0), (r1, c1) = (e["location"].values()), (e["end_location"].values())
            assert r0 == r1
            line = lines[r0 - 1]
            lines[r0 - 1] = line[: c0 - 1] + e["content"] + line[c1 - 1 :]
    run("check", "model.py", "--fix", "--no-cache", cwd=project)
    assert "".join(lines) == (project / "model.py").read_text()


# ---- sarif ----------------------------------------------------------------------------------


def test_sarif_validates_against_schema(project, sarif_schema):
    import jsonschema

    (project / "bin.py").write_bytes(b"import tensorflow\x00\n")
    r = run("check", "model.py", "broken.py", "bin.py", "--output-format", "sarif", "--no-cache", cwd=project)
    assert r.returncode == 1
    log = r.json()
    validator = jsonschema.Draft4Validator(sarif_schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])

    assert log["version"] == "2.1.0"
    run0 = log["runs"][0]
    driver = run0["tool"]["driver"]
    assert driver["name"] == "kerasfit"
    ids = [rule["id"] for rule in driver["rules"]]
    assert set(all_rules()) <= set(ids) and "KF001" in ids
    results = run0["results"]
    assert [(x["ruleId"], x["locations"][0]["physicalLocation"]["region"]["startLine"]) for x in results] == [
        ("KF001", 2), ("KF101", 2), ("KF101", 4)
    ]
    for x in results:
        assert ids[x["ruleIndex"]] == x["ruleId"]
    fixable = results[1]
    assert fixable["level"] == "warning"
    region = fixable["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (2, 6)
    rep = fixable["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert rep["insertedContent"]["text"] == "True"
    assert rep["deletedRegion"]["startColumn"] == 44 and rep["deletedRegion"]["endColumn"] == 49
    assert "fixes" not in results[2]
    assert results[2]["properties"] == {"finding": "UnfusedOp", "fields": {"op": "tf.nn.batch_normalization"}}
    assert "properties" not in results[0]  # a syntax error is no rule's finding
    notes = run0["invocations"][0]["toolExecutionNotifications"]
    assert any("bin.py" in n["message"]["text"] for n in notes)


def test_sarif_clean_run_validates(tmp_path, sarif_schema):
    import jsonschema

    write(tmp_path / "ok.py", "import tensorflow as tf\n")
    r = run("check", "ok.py", "--output-format", "sarif", cwd=tmp_path)
    assert r.returncode == 0
    jsonschema.Draft4Validator(sarif_schema).validate(r.json())
    assert r.json()["runs"][0]["results"] == []


# ---- github -----------------------------------------------------------------------------------


def test_github_annotations(project):
    r = run("check", "model.py", "broken.py", "--output-format", "github", "--no-cache", cwd=project)
    assert r.returncode == 1
    assert len(r.lines) == 3
    assert r.lines[0].startswith("::error file=broken.py,line=2,col=")
    line = r.lines[1]
    assert line.startswith("::warning file=model.py,line=2,col=6,endLine=2,endColumn=50,")
    assert "title=KF101 unfused-batchnorm::KF101 " in line
    props = line.split("::")[1]
    assert ":" not in props.split(" ", 1)[1]  # properties are escaped
    assert r.lines[2].startswith("::warning file=model.py,line=4,col=5,")


def test_github_escapes_newlines_and_percent():
    d = Diagnostic("KF101", "unfused-batchnorm", "100% slow\nreally", Severity.WARNING, "a,b:c.py", 1, 0, 1, 3)
    out = reporters.github([FileResult("a,b:c.py", [d])])
    assert out == "::warning file=a%2Cb%3Ac.py,line=1,col=1,endLine=1,endColumn=4,title=KF101 unfused-batchnorm::KF101 100%25 slow%0Areally"


# ---- paths that try to forge output (issue 17, item 7) -----------------------------------------

INJECTED = "d\n::error::injected.py"  # a newline, then a GitHub workflow command
ODD = "p%41 b\r:c,\x1b[31m\x0b\u2028.py"  # %, space, CR, ':', ',', ESC, VT, LINE SEPARATOR


@pytest.fixture
def forged(tmp_path):
    write(tmp_path / INJECTED, BAD)
    write(tmp_path / ODD, BAD)
    write(tmp_path / "e\n::error::unreadable.py", b"import tensorflow\x00\n")  # an error line names it
    return tmp_path


def _no_forged_lines(out: str) -> None:
    for line in out.splitlines():
        assert not line.startswith("::error::"), out
    assert "\x1b" not in out and "\x0b" not in out and "\u2028" not in out, out


def test_text_output_escapes_control_characters_in_paths(forged):
    for args in ([], ["--show-fixes"], ["--output-format", "json"], ["--diff"]):
        r = run("check", ".", "--no-cache", *args, cwd=forged)
        assert r.returncode == 1, r
        _no_forged_lines(r.stdout)
        _no_forged_lines(r.stderr)
        assert "e\\n::error::unreadable.py: binary file" in r.stdout + r.stderr, (args, r)
    r = run("check", ".", "--no-cache", cwd=forged)
    found = finding_lines(r.stdout)
    assert found[0].startswith("d\\n::error::injected.py:2:6: KF101 "), found
    assert found[1].startswith("p%41 b\\r:c,\\x1b[31m\\x0b\\u2028.py:2:6: KF101 "), found
    diff = run("check", ".", "--no-cache", "--diff", cwd=forged).stdout
    assert "--- a/d\\n::error::injected.py\n" in diff and "+++ b/d\\n::error::injected.py\n" in diff


def test_a_config_error_naming_a_forged_directory_is_one_line(tmp_path):
    project = tmp_path / "p\n::error::x"
    write(project / "pyproject.toml", "[tool.kerasfit]\nbogus = 1\n")
    write(project / "model.py", BAD)
    for fmt in ("text", "github"):
        r = run("check", "model.py", "--output-format", fmt, cwd=project)
        assert r.returncode == 2
        (line,) = r.stderr.splitlines()
        assert line.startswith("kerasfit: error: ") and "p\\n::error::x" in line and "bogus" in line


def test_github_output_escapes_paths_by_the_workflow_command_rules(forged):
    r = run("check", ".", "--no-cache", "--output-format", "github", cwd=forged)
    assert r.returncode == 1
    _no_forged_lines(r.stdout)
    _no_forged_lines(r.stderr)
    assert len(r.lines) == 3 and all(line.startswith(("::warning file=", "::error file=")) for line in r.lines), r.lines
    props = {line.split(" ", 1)[1].split("::", 1)[0].split(",", 1)[0] for line in r.lines}
    assert props == {
        "file=d%0A%3A%3Aerror%3A%3Ainjected.py",
        "file=e%0A%3A%3Aerror%3A%3Aunreadable.py",
        "file=p%2541 b%0D%3Ac%2C\\x1b[31m\\x0b\\u2028.py",
    }
    assert r.stderr.splitlines() == ["error: e\\n::error::unreadable.py: binary file (contains NUL bytes), skipped"]


def test_sarif_uris_are_percent_encoded_and_validate(forged, sarif_schema):
    import jsonschema

    r = run("check", ".", "--no-cache", "--output-format", "sarif", cwd=forged)
    assert r.returncode == 1
    log = r.json()
    validator = jsonschema.Draft4Validator(sarif_schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = list(validator.iter_errors(log))
    assert not errors, [e.message for e in errors[:5]]
    uris = [
        loc["physicalLocation"]["artifactLocation"]["uri"] for res in log["runs"][0]["results"] for loc in res["locations"]
    ]
    uris += [
        change["artifactLocation"]["uri"]
        for res in log["runs"][0]["results"] for fix in res["fixes"] for change in fix["artifactChanges"]
    ]
    assert sorted(set(uris)) == ["d%0A%3A%3Aerror%3A%3Ainjected.py", "p%2541%20b%0D%3Ac%2C%1B%5B31m%0B%E2%80%A8.py"]
    assert {unquote(u) for u in uris} == {INJECTED, ODD}
    # RFC 3986: only unreserved characters, '/' and percent-escapes
    assert all(re.fullmatch(r"(?:[A-Za-z0-9\-._~/]|%[0-9A-F]{2})+", u) for u in uris), uris


# A right-to-left override makes "evil\u202e2:yp.x" read as "evilx.py:2"; zero-width
# characters hide what a name is (issue 30, item 17)
SPOOF = "evil\u202e1:yp.\u200b\u200d\u2066\ufeff.py"


@pytest.mark.parametrize("fmt", ["text", "github"])
def test_bidi_controls_and_zero_width_characters_are_escaped(tmp_path, fmt):
    write(tmp_path / SPOOF, BAD)
    write(tmp_path / "e\u202e.py", b"import tensorflow\x00\n")  # an error line names it
    r = run("check", ".", "--no-cache", "--output-format", fmt, cwd=tmp_path)
    assert r.returncode == 1, r
    for ch in "\u202e\u200b\u200d\u2066\ufeff":
        assert ch not in r.stdout + r.stderr, (fmt, repr(r.stdout + r.stderr))
    assert "evil\\u202e1" in r.stdout and "yp.\\u200b\\u200d\\u2066\\ufeff.py" in r.stdout, (fmt, r)
    assert "e\\u202e.py" in r.stdout + r.stderr, (fmt, r)


def test_sarif_for_a_file_name_that_is_not_utf8(tmp_path, sarif_schema):
    """A name of any bytes: the whole run used to end in an internal error, nothing printed."""
    import jsonschema

    write(tmp_path / os.fsdecode(b"m\xff.py"), BAD)
    write(tmp_path / os.fsdecode(b"n\xfe.py"), b"import tensorflow\x00\n")  # an error line names it
    r = run("check", ".", "--no-cache", "--output-format", "sarif", cwd=tmp_path)
    assert r.returncode == 1, r
    log = r.json()
    assert not list(jsonschema.Draft4Validator(sarif_schema).iter_errors(log))
    (result,) = log["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "m%FF.py"
    notes = log["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert [n["message"]["text"] for n in notes] == ["n\\xfe.py: binary file (contains NUL bytes), skipped"]
    r.stdout.encode("utf-8")  # (no lone surrogate anywhere)


# ---- lsp ----------------------------------------------------------------------------------------


def test_lsp_diagnostics_keyed_by_uri_with_utf16_columns(tmp_path):
    src = 'import tf_keras as keras\nlabel = "🚀"; bn = keras.layers.BatchNormalization(fused=False)\n'
    f = write(tmp_path / "emoji.py", src)
    r = run("check", "emoji.py", "--output-format", "lsp", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1
    out = r.json()
    assert list(out) == [f.resolve().as_uri()]
    (diag,) = out[f.resolve().as_uri()]
    line = src.splitlines()[1]
    char_col = line.index("keras.layers")
    assert diag["range"]["start"] == {"line": 1, "character": char_col + 1}  # the rocket is 2 UTF-16 units
    end_char = line.index(")") + 1
    assert diag["range"]["end"] == {"line": 1, "character": end_char + 1}
    assert diag["code"] == "KF101" and diag["source"] == "kerasfit" and diag["severity"] == 2
    assert installed_page(diag["codeDescription"]["href"]).name == "KF101.md"  # an absolute URI, as LSP wants
    assert diag["message"]
    (edit,) = diag["data"]["fix"]["edits"]
    assert edit["newText"] == "True"
    start = line.index("False")
    assert edit["range"] == {"start": {"line": 1, "character": start + 1}, "end": {"line": 1, "character": start + 6}}
    # applying the edit in UTF-16 units gives the fixed line
    u16 = line.encode("utf-16-le")
    a, b = edit["range"]["start"]["character"] * 2, edit["range"]["end"]["character"] * 2
    assert (u16[:a] + "True".encode("utf-16-le") + u16[b:]).decode("utf-16-le") == line.replace("False", "True")


def test_lsp_clean_is_empty_object(tmp_path):
    write(tmp_path / "ok.py", "import tensorflow as tf\n")
    r = run("check", "ok.py", "--output-format", "lsp", cwd=tmp_path)
    assert r.returncode == 0 and r.json() == {}


# ---- text summary (reporter level, covers rules not yet written) ---------------------------------


def _diag(app: Applicability | None, row: int = 1) -> Diagnostic:
    fix = Fix(app, "t", (Edit(0, 1, "x", row, 0, row, 1),)) if app else None
    return Diagnostic("KF101", "unfused-batchnorm", "m", Severity.WARNING, "f.py", row, 0, row, 1, fix)


def test_text_summary_counts_fixable_and_hidden_unsafe():
    files = [FileResult("f.py", [_diag(Applicability.SAFE, 1), _diag(Applicability.UNSAFE, 2), _diag(Applicability.UNSAFE, 3), _diag(Applicability.DISPLAY, 4), _diag(None, 5)])]
    out = reporters.text(files)
    assert out.count(" [*] ") == 1
    assert "Found 5 finding(s)." in out
    assert "[*] 1 fixable with the `--fix` option." in out
    assert "(2 hidden fix(es) can be enabled with the `--unsafe-fixes` option.)" in out
    unsafe = reporters.text(files, unsafe=True)
    assert unsafe.count(" [*] ") == 3 and "[*] 3 fixable" in unsafe and "hidden" not in unsafe
    assert reporters.text([FileResult("f.py")]).endswith("All checks passed!")


def test_a_new_format_is_one_registry_entry(tmp_path, monkeypatch, capsys):
    from kerasfit.front.checkcmd import CheckArgs, run_check

    count = reporters.OutputFormat("count", "the number of findings", lambda files, o: str(sum(len(f.diagnostics) for f in files)))
    monkeypatch.setitem(reporters.FORMATS, "count", count)
    path = write(tmp_path / "model.py", BAD + NOFIX)
    assert run_check(CheckArgs(paths=[path], output_format="count", no_cache=True)) == 1
    assert capsys.readouterr().out == "2\n"


def test_the_command_line_offers_every_registered_format(tmp_path):
    r = run("check", "--output-format", "nope", "x.py", cwd=tmp_path)
    assert r.returncode == 2
    offered = r.stderr.split("is not one of", 1)[1]
    assert [n.strip(" '.\n") for n in offered.split(",")] == list(reporters.FORMATS)
