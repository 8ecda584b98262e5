"""End to end: a pytest-lsp client drives `python -m kerasfit lsp` over stdio."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kfhelpers import installed_page
from lsp_helpers import Doc
from lsprotocol import types

pytestmark = [pytest.mark.lsp, pytest.mark.asyncio]

# The emoji before the call makes UTF-16 columns differ from character columns.
BN = 'import tf_keras\nname = "😀"; bn = tf_keras.layers.BatchNormalization(fused=False)(tf_keras.layers.Conv2D(8, 3)(x))\n'
TWO = (
    "import tf_keras\n"
    "from tf_keras import layers\n"
    "\n"
    "a = layers.BatchNormalization(fused=False)(layers.Conv2D(8, 3)(x))\n"
    "b = tf_keras.layers.BatchNormalization(axis=1, fused=False)(layers.Conv2D(8, 3)(x))\n"
)
CLEAN = "import tf_keras\nbn = tf_keras.layers.BatchNormalization()\n"


def kf101(diags):
    return [d for d in diags if d.code == "KF101"]


def whole(text: str) -> types.Range:
    n = len(text.splitlines())
    return types.Range(start=types.Position(line=0, character=0), end=types.Position(line=n, character=0))


async def test_diagnostics_on_open_match_batch_lsp_output(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", BN)
    diags = await doc.diagnostics(lambda ds: bool(ds))
    assert [d.code for d in diags] == ["KF101"]
    d = diags[0]
    assert d.source == "kerasfit"
    assert d.severity == types.DiagnosticSeverity.Warning
    # the installed rule page, an absolute URI that opens from this (non-repository) project
    assert d.code_description is not None and installed_page(d.code_description.href).name == "KF101.md"
    # `bn = ` starts after `name = "😀"; ` — 13 characters, 14 UTF-16 code units.
    assert d.range.start == types.Position(line=1, character=BN.splitlines()[1].index("tf_keras") + 1)
    assert d.data["name"] == "unfused-batchnorm"
    assert d.data["fix"]["applicability"] == "safe"

    # The server publishes exactly what `kerasfit check --output-format lsp` writes.
    out = subprocess.run(
        [sys.executable, "-m", "kerasfit", "check", "--no-cache", "--output-format", "lsp", str(doc.path)],
        capture_output=True, text=True, cwd=tmp_path,
    )
    batch = json.loads(out.stdout)[doc.path.resolve().as_uri()]
    from lsprotocol.converters import get_converter

    published = [get_converter().unstructure(x) for x in diags]
    assert published == batch


async def test_rule_links_follow_the_projects_docs_url(client, tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.kerasfit]\ndocs-url = "https://docs.example.com/kf"\n')
    doc = Doc(client, tmp_path / "model.py", BN)
    (d,) = await doc.diagnostics(lambda ds: bool(ds))
    assert d.code_description is not None and d.code_description.href == "https://docs.example.com/kf/rules/KF101.md"


async def test_quickfix_applies_and_diagnostics_clear(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", BN)
    (d,) = await doc.diagnostics(lambda ds: bool(ds))
    actions = await doc.code_actions(d.range, diags=[d])
    titles = [a.title for a in actions]
    assert "Use the fused batch-norm kernel" in titles
    assert "Disable KF101 for this line" in titles
    fix = next(a for a in actions if a.title == "Use the fused batch-norm kernel")
    assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred
    assert fix.diagnostics[0].code == "KF101"
    doc.apply(fix.edit)
    assert "BatchNormalization(fused=True)" in doc.text
    assert doc.text.splitlines()[1].startswith('name = "😀"; bn = tf_keras')  # nothing before it moved
    await doc.diagnostics(lambda ds: not ds)


async def test_code_action_at_cursor_without_context(client, tmp_path: Path):
    """An editor asking with an empty range at the cursor still gets the fix."""
    doc = Doc(client, tmp_path / "model.py", TWO)
    await doc.diagnostics(lambda ds: len(ds) == 2)
    cursor = types.Position(line=4, character=2)
    actions = await doc.code_actions(types.Range(start=cursor, end=cursor), only=[types.CodeActionKind.QuickFix])
    assert [a.title for a in actions] == ["Use the fused batch-norm kernel", "Disable KF101 for this line"]
    doc.apply((await doc.resolve(actions[0])).edit)
    rest = await doc.diagnostics(lambda ds: len(ds) == 1)
    assert rest[0].range.start.line == 3


async def test_fix_all(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", TWO)
    await doc.diagnostics(lambda ds: len(ds) == 2)
    actions = await doc.code_actions(whole(doc.text), only=["source.fixAll"])
    assert [a.kind for a in actions] == ["source.fixAll.kerasfit"]
    doc.apply((await doc.resolve(actions[0])).edit)
    assert doc.text.count("fused=True") == 2
    await doc.diagnostics(lambda ds: not ds)
    # nothing left to fix: no fixAll action offered
    assert await doc.code_actions(whole(doc.text), only=["source.fixAll.kerasfit"]) == []


async def test_fix_all_is_resolved_only_when_picked(client, tmp_path: Path):
    """A code-action request (sent on every cursor move) must not run the fixer: the
    fix-all comes back without its edit, and codeAction/resolve computes it."""
    doc = Doc(client, tmp_path / "model.py", TWO)
    await doc.diagnostics(lambda ds: len(ds) == 2)
    (action,) = await doc.code_actions(whole(doc.text), only=["source.fixAll"])
    assert action.edit is None and action.data["kerasfit"] == "fixAll"
    resolved = await client.code_action_resolve_async(action)
    (change,) = resolved.edit.document_changes
    assert change.text_document.version == doc.version
    # an action resolved after the document moved on gets no (wrong) edit
    doc.change(doc.text + "\n")
    await doc.diagnostics(lambda ds: len(ds) == 2 and doc.version == 2)
    assert (await client.code_action_resolve_async(action)).edit is None


async def test_a_resolve_overtaken_by_a_change_returns_no_stale_edit(client, tmp_path: Path):
    """A didChange handled while codeAction/resolve runs the fixer: the edit computed for
    the old text is not sent (issue 17, item 8)."""
    n = 500  # enough findings that the fix-all takes well over a second
    text = "import tf_keras\n" + "".join(f"b{i} = tf_keras.layers.BatchNormalization(fused=False)(tf_keras.layers.Conv2D(8, 3)(x))\n"
                                    for i in range(n))
    doc = Doc(client, tmp_path / "model.py", text)
    await doc.diagnostics(lambda ds: len(ds) == n, timeout=60)
    (action,) = await doc.code_actions(whole(doc.text), only=["source.fixAll"])
    pending = asyncio.ensure_future(client.code_action_resolve_async(action))
    await asyncio.sleep(0.3)  # the server has started fixing version 1
    assert not pending.done()
    doc.change("import tf_keras\nprint('rewritten')\n" + doc.text.split("\n", 1)[1])
    resolved = await asyncio.wait_for(pending, 60)
    if resolved.edit is not None:  # recomputed for the current text is fine too
        for dc in resolved.edit.document_changes or []:
            assert dc.text_document.version == doc.version, "an edit for an older version"
    await doc.diagnostics(lambda ds: len(ds) == n, timeout=60)


async def test_only_quickfix_excludes_fix_all(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", TWO)
    await doc.diagnostics(lambda ds: len(ds) == 2)
    actions = await doc.code_actions(whole(doc.text), only=[types.CodeActionKind.QuickFix])
    assert actions and all(a.kind == types.CodeActionKind.QuickFix for a in actions)


async def test_noqa_action_appends_and_extends(client, tmp_path: Path):
    text = TWO.replace("(8, 3)(x))\n", "(8, 3)(x))  # noqa: E501\n")
    doc = Doc(client, tmp_path / "model.py", text)
    diags = await doc.diagnostics(lambda ds: len(ds) == 2)
    for d in diags:
        actions = await doc.code_actions(d.range, diags=[d])
        noqa = next(a for a in actions if a.title == "Disable KF101 for this line")
        doc.apply(noqa.edit)
    lines = doc.text.splitlines()
    assert lines[3] == "a = layers.BatchNormalization(fused=False)(layers.Conv2D(8, 3)(x))  # noqa: E501, KF101"
    assert lines[4].endswith("(8, 3)(x))  # noqa: E501, KF101")
    await doc.diagnostics(lambda ds: not ds)


async def test_noqa_action_only_where_a_comment_may_go(client, tmp_path: Path):
    """As `check --add-noqa`: a call over two lines gets the comment on a line that takes
    one; a line continued with a backslash gets no noqa action (a comment there breaks the code)."""
    text = (
        "import tf_keras\n"
        "a = tf_keras.layers.BatchNormalization(\n"
        "    fused=False)(tf_keras.layers.Conv2D(8, 3)(x))\n"
        "b = tf_keras.layers.BatchNormalization(fused=False)(tf_keras.layers.Conv2D(8, 3)(x)) + \\\n"
        "    1\n"
    )
    doc = Doc(client, tmp_path / "model.py", text)
    diags = sorted(await doc.diagnostics(lambda ds: len(ds) == 2), key=lambda d: d.range.start.line)
    titles = [a.title for a in await doc.code_actions(diags[1].range, diags=[diags[1]])]
    assert "Disable KF101 for this line" not in titles and titles  # the fix is still offered
    actions = await doc.code_actions(diags[0].range, diags=[diags[0]])
    doc.apply(next(a for a in actions if a.title == "Disable KF101 for this line").edit)
    assert doc.text.splitlines()[1] == "a = tf_keras.layers.BatchNormalization(  # noqa: KF101"
    compile(doc.text, "model.py", "exec")
    await doc.diagnostics(lambda ds: len(ds) == 1)


async def test_config_reload_on_pyproject_change(client, tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    doc = Doc(client, tmp_path / "pkg" / "model.py", BN)  # configured by the pyproject.toml above it
    await doc.diagnostics(lambda ds: bool(kf101(ds)))
    assert any(r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES for r in client.registrations)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.kerasfit]\nignore = ["KF101"]\n')
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Created)]
        )
    )
    await doc.diagnostics(lambda ds: not ds)
    pyproject.write_text("[tool.kerasfit]\nignore = []\n")
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)]
        )
    )
    await doc.diagnostics(lambda ds: bool(kf101(ds)))


async def test_bad_pyproject_is_reported_not_fatal(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", BN)
    await doc.diagnostics(lambda ds: bool(ds))
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.kerasfit]\nignore = ["KF1O1"]\n')
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)])
    )
    for _ in range(100):
        if client.messages:
            break
        await asyncio.sleep(0.05)
    assert "KF1O1" in client.messages[-1].message
    assert client.messages[-1].type == types.MessageType.Error
    # still serving; fixing the file re-lints it
    client.diagnostics.pop(doc.uri)
    pyproject.write_text("[tool.kerasfit]\n")
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)])
    )
    await doc.diagnostics(lambda ds: bool(kf101(ds)))


async def test_did_change_configuration(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", BN)
    await doc.diagnostics(lambda ds: bool(ds))
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"kerasfit": {"ignore": ["KF101"]}})
    )
    await doc.diagnostics(lambda ds: not ds)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"kerasfit": {}}))
    await doc.diagnostics(lambda ds: bool(ds))


async def test_initialization_options(client_ignoring_kf101, tmp_path: Path):
    doc = Doc(client_ignoring_kf101, tmp_path / "model.py", BN)
    await doc.diagnostics(lambda ds: True)
    await asyncio.sleep(0.3)
    assert list(client_ignoring_kf101.diagnostics[doc.uri]) == []


async def test_syntax_error_mid_edit_then_recovery(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", BN)
    await doc.diagnostics(lambda ds: bool(kf101(ds)))
    half = BN + "def build(:\n    x = tf_keras.layers.BatchNormalization(fus"
    doc.change(half)
    # the finding above the half-typed function stays while typing
    ds = await doc.diagnostics(lambda ds: sorted(d.code for d in ds) == ["KF001", "KF101"])
    err = next(d for d in ds if d.code == "KF001")
    assert next(d for d in ds if d.code == "KF101").range.start.line == 1
    assert err.severity == types.DiagnosticSeverity.Error
    assert err.message.startswith("Cannot parse")
    # the server is still up and answering requests on the broken text
    assert await doc.code_actions(err.range, diags=[err]) == []
    doc.change(BN + "def build():\n    x = tf_keras.layers.BatchNormalization(fused=False)\n")
    diags = await doc.diagnostics(lambda ds: len(kf101(ds)) == 2)
    assert [d.range.start.line for d in diags] == [1, 3]


async def test_rapid_changes_publish_only_the_latest(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", CLEAN)
    await doc.diagnostics(lambda ds: True)
    for i in range(1, 8):  # faster than the debounce: only the last text is linted
        doc.change(CLEAN + "a = tf_keras.layers.BatchNormalization(fused=False)\n" * i)
    diags = await doc.diagnostics(lambda ds: len(ds) == 7)
    assert len(diags) == 7


async def test_hover_on_flagged_line(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", TWO)
    await doc.diagnostics(lambda ds: len(ds) == 2)
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=doc.uri), position=types.Position(line=3, character=0))
    )
    assert hover is not None and hover.contents.kind == types.MarkupKind.Markdown
    text = hover.contents.value
    assert "**KF101** `unfused-batchnorm`" in text
    assert "Flags batch normalization that does not use the fused kernel" in text  # "What it does"
    assert "Why is this slow" not in text  # one paragraph, not the whole page
    page = re.search(r"`kerasfit explain KF101` \(\[rule page\]\((file://[^)]+)\)\)", text)
    assert page and installed_page(page.group(1)).name == "KF101.md", text  # a link that opens
    assert hover.range.start.line == 3
    none = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=doc.uri), position=types.Position(line=0, character=3))
    )
    assert none is None


async def test_non_tensorflow_file_has_no_findings(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "plain.py", "def f(:\n")
    diags = await doc.diagnostics(lambda ds: True)
    assert diags == []


async def test_close_clears_diagnostics(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", BN)
    await doc.diagnostics(lambda ds: bool(ds))
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=doc.uri)))
    await doc.diagnostics(lambda ds: not ds)


async def test_clean_shutdown(client, tmp_path: Path):
    Doc(client, tmp_path / "model.py", BN)
    await client.shutdown_async(None)
    client.exit(None)
    await asyncio.wait_for(client._server.wait(), 10)
    assert client._server.returncode == 0
    client.capabilities = None  # already shut down: the fixture must not do it again


MIXED = (
    "import tf_keras\n"
    "from tf_keras import layers, regularizers\n"
    "\n"
    "x = layers.Conv2D(30, 3, padding='same')(x)\n"
    "d = layers.Dense(64, kernel_regularizer=regularizers.l2(1e-4))\n"
    "b = layers.BatchNormalization(fused=False)(layers.Conv2D(8, 3)(x))\n"
)


async def test_unsafe_and_display_only_fixes(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", MIXED)
    diags = await doc.diagnostics(lambda ds: {"KF102", "KF104", "KF101"} <= {d.code for d in ds})
    by_code = {d.code: d for d in diags}

    actions = await doc.code_actions(by_code["KF102"].range, only=[types.CodeActionKind.QuickFix])
    unsafe = [a for a in actions if a.title.endswith("(unsafe)")]
    assert len(unsafe) == 1 and not unsafe[0].is_preferred  # offered: the user picks it explicitly

    actions = await doc.code_actions(by_code["KF104"].range, only=[types.CodeActionKind.QuickFix])
    kf104 = [a for a in actions if a.diagnostics and a.diagnostics[0].code == "KF104"]
    assert [a.title for a in kf104] == ["Disable KF104 for this line"]  # display-only: no edit offered

    # fixAll applies the safe fix only
    (fix_all,) = await doc.code_actions(whole(doc.text), only=["source.fixAll"])
    doc.apply((await doc.resolve(fix_all)).edit)
    assert "fused=True" in doc.text and "Conv2D(30," in doc.text
    left = await doc.diagnostics(lambda ds: "KF101" not in {d.code for d in ds})
    assert {"KF102", "KF104"} <= {d.code for d in left}


async def test_unsafe_fixes_setting_extends_fix_all(client, tmp_path: Path):
    doc = Doc(client, tmp_path / "model.py", MIXED)
    await doc.diagnostics(lambda ds: "KF102" in {d.code for d in ds})
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"kerasfit": {"unsafeFixes": True, "debounceMs": 50}})
    )
    await asyncio.sleep(0.2)
    (fix_all,) = await doc.code_actions(whole(doc.text), only=["source.fixAll.kerasfit"])
    assert "unsafe" in fix_all.title
    doc.apply((await doc.resolve(fix_all)).edit)
    assert "Conv2D(32," in doc.text and "fused=True" in doc.text
    left = await doc.diagnostics(lambda ds: not {"KF101", "KF102"} & {d.code for d in ds})
    assert "KF104" in {d.code for d in left}  # display-only stays


async def test_quickfix_removes_the_import_it_orphans_like_the_cli(client, tmp_path: Path):
    src = "from keras.layers import Conv2D, ZeroPadding2D\nx = ZeroPadding2D(1)(x)\nx = Conv2D(8, 3)(x)\n"
    doc = Doc(client, tmp_path / "pad.py", src)
    (d,) = await doc.diagnostics(lambda ds: bool(ds))
    assert d.code == "KF103"
    actions = await doc.code_actions(d.range, diags=[d], only=[types.CodeActionKind.QuickFix])
    doc.apply((await doc.resolve(actions[0])).edit)  # an import edit is resolved lazily
    assert doc.text == 'from keras.layers import Conv2D\nx = Conv2D(8, 3, padding="same")(x)\n'
    from kerasfit.project.check import check_source

    assert check_source(src, tmp_path / "pad.py", fix=True).fixed_source == doc.text
    await doc.diagnostics(lambda ds: not ds)
