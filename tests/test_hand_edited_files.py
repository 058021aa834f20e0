"""The JSON files of a run directory or an archive as an editor saves them (a UTF-8 byte order mark, UTF-16), and
output paths a user may type (a trailing slash): each read as a trace is, or refused in one line naming the file."""

import pytest
from test_bad_input import _copy_of_run
from test_hostile_input import _in_process

BOM = b"\xef\xbb\xbf"


def _encode(name, encode):
    def change(run):
        (run / name).write_bytes(encode((run / name).read_bytes()))

    return change


@pytest.mark.parametrize("name", ["manifest.json", "samples.json"])
def test_a_byte_order_mark_before_a_run_file_changes_nothing(name, tmp_path):
    """A trace may begin with an editor's UTF-8 byte order mark; a manifest or sample store saved by that editor
    was refused ('UTF-8 byte order mark (BOM) is not supported')."""
    plain = _in_process("analyze", _copy_of_run(tmp_path, lambda run: None), "--format", "csv")
    marked = _in_process("analyze", _copy_of_run(tmp_path, _encode(name, lambda data: BOM + data)), "--format", "csv")
    assert marked.exit_code == 0, marked.output
    assert marked.stdout == plain.stdout


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be"])
@pytest.mark.parametrize("name", ["manifest.json", "samples.json"])
def test_a_run_file_in_utf16_is_named_so(name, codec, tmp_path):
    """Without a byte order mark, UTF-16 read as UTF-8 was 'an unescaped quote (") inside a string'."""
    run = _copy_of_run(tmp_path, _encode(name, lambda data: data.decode("utf-8").encode(codec)))
    done = _in_process("analyze", run)
    assert done.exit_code == 2 and isinstance(done.exception, SystemExit), done.exception
    (line,) = done.stderr.strip().splitlines()
    assert line == f"kernelscope: error: {run}/{name}: is not valid JSON (it is UTF-16 text, and kernelscope reads JSON files as UTF-8)"

