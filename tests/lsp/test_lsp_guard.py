"""One document that breaks the check never breaks the server (issue 8: the server side
of "no input crashes the run or the server").

An exception while checking, a refusal by the engine's parse guard, and a check that
runs past its budget each become a diagnostic on that document; other documents are
still checked and the server still answers.
"""

from __future__ import annotations

import pytest

from raw_client import RawServer, wait_for_diagnostics

BN = "import tf_keras\nbn = tf_keras.layers.BatchNormalization(fused=False)\n"


def open_doc(server: RawServer, path, text: str) -> str:
    uri = path.as_uri()
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python",
                                                            "version": 1, "text": text}})
    return uri


@pytest.fixture()
def server(tmp_path):
    srv = RawServer(tmp_path)
    srv.initialize(tmp_path)
    # the first check imports the engine and its rules: not part of any budget below
    wait_for_diagnostics(srv, open_doc(srv, tmp_path / "warm.py", BN), lambda ds: bool(ds))
    yield srv
    assert srv.close() == 0


def not_checked(diags) -> bool:
    return len(diags) == 1 and "check this file" in diags[0]["message"]


def assert_still_checks(server: RawServer, tmp_path) -> None:
    uri = open_doc(server, tmp_path / "ok.py", BN)
    diags = wait_for_diagnostics(server, uri, lambda ds: bool(ds))
    assert [d["code"] for d in diags] == ["KF101"]
    assert server.alive()


def test_an_exception_while_checking_is_a_diagnostic_on_that_document(server, tmp_path):
    # JSON can carry a lone surrogate; the engine cannot encode it
    uri = open_doc(server, tmp_path / "surrogate.py", "import keras\nx = '\ud800'\n")
    (diag,) = wait_for_diagnostics(server, uri, not_checked)
    assert diag["message"].startswith("kerasfit could not check this file (internal error): ")
    assert "UnicodeEncodeError" in diag["message"] and "\n" not in diag["message"]
    assert diag["range"]["start"] == {"line": 0, "character": 0}
    assert_still_checks(server, tmp_path)


def test_a_parse_guard_refusal_is_a_diagnostic_on_that_document(server, tmp_path):
    uri = open_doc(server, tmp_path / "deep.py", "import keras\nx = " + " + ".join(["a"] * 3000) + "\n")
    (diag,) = wait_for_diagnostics(server, uri, not_checked)
    assert diag["message"].startswith("kerasfit did not check this file: ")
    assert "deep.py" in diag["message"]
    assert_still_checks(server, tmp_path)


def test_a_check_past_its_budget_leaves_the_lint_thread_to_the_other_documents(server, tmp_path):
    server.notify("workspace/didChangeConfiguration", {"settings": {"kerasfit": {"debounceMs": 0,
                                                                                 "lintTimeoutMs": 1000}}})
    # 30,000 flagged lines (1.5 MB, under the size budget): several seconds of checking
    # even on an idle machine, far past the 1 s budget
    text = "import tf_keras as keras\n" + "x = keras.layers.BatchNormalization(fused=False)\n" * 30_000
    uri = open_doc(server, tmp_path / "slow.py", text)
    (diag,) = wait_for_diagnostics(server, uri, not_checked)
    assert diag["message"] == "kerasfit did not check this file: checking took longer than 1 s"
    assert_still_checks(server, tmp_path)


def test_a_file_that_overflows_the_native_parser_does_not_kill_the_server(server, tmp_path):
    # valid Python; 10,000 levels deep in libcst's tree (issue 8, item 6: the server died, rc -11)
    uri = open_doc(server, tmp_path / "chain.py", "import keras\nx = " + " and ".join(["a"] * 10_000) + "\n")
    diags = wait_for_diagnostics(server, uri, lambda ds: bool(ds), timeout=60)
    assert server.proc.poll() is None
    assert len(diags) == 1 and diags[0]["range"]["start"]["line"] == 1, diags
    assert_still_checks(server, tmp_path)


def test_checks_cancelled_by_quick_edits_log_no_error(server, tmp_path):
    """Each check an edit superseded used to log an ERROR traceback ("Future exception was
    never retrieved": 400-480 of them for 500 quick edits); a stopped check is not an error
    (issue 30, item 18)."""
    import time

    text = "import tensorflow as tf\n" + "".join(f"x{i} = tf.keras.layers.Dense({31 + i})\n" for i in range(400))
    uri = open_doc(server, tmp_path / "m.py", text)
    last = 150
    for version in range(2, last + 1):
        server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                 "contentChanges": [{"text": text + f"y = {version}\n"}]})
        time.sleep(0.005)
    diags = wait_for_diagnostics(server, uri, lambda ds: len(ds) > 300, timeout=60, version=last)
    assert len(diags) > 300
    server.pump(1.0)
    log = server.stderr.decode("utf-8", "replace")
    assert "stopped before its end" in log  # checks were superseded
    assert "ERROR" not in log and "Traceback" not in log, log[-3000:]
