import argparse

import pytest

from repro.cli import data as cli
from repro.errors import UserError


def run(capsys, *argv):
    """Parse like the main `repro` parser and call the handler; UserError -> status 2 as the main CLI does."""
    parser = argparse.ArgumentParser(prog="repro")
    command = cli.COMMAND
    command.add_arguments(parser.add_subparsers(dest="command").add_parser(command.name, help=command.help), [])
    args = parser.parse_args(["data", *argv])
    try:
        status = args.func(args)
    except UserError as e:
        status, out = 2, str(e)
        assert "\n" not in out
        return status, out
    return status, capsys.readouterr().out


def test_list_shows_every_dataset_and_its_state(root, capsys):
    status, out = run(capsys, "list")
    assert status == 0 and out.splitlines()[0].split() == ["name", "kind", "size", "vocabulary", "source", "prepared"]
    for name in (
        "text8",
        "enwik8",
        "wiki-lead8",
        "wiki-lead",
        "linux-doc",
        "cifar10",
        "imagenet64",
        "fashion-mnist",
        "audio",
        "moh-audio",
        "file",
    ):
        assert f"\n{name} " in out
    assert f"data root: {root}" in out


def test_prepare_info_verify_a_file_corpus(root, tmp_path, capsys):
    src = tmp_path / "corpus.txt"
    src.write_text("some text of mine\n" * 100)
    status, out = run(capsys, "prepare", "file", "--from", str(src), "--kind", "chars")
    assert status == 0 and "prepared file" in out and "train 1620" in out
    status, out = run(capsys, "info", "file", "--from", str(src), "--kind", "chars")
    assert status == 0 and "verified     yes" in out and "valid        90 uint8" in out
    assert run(capsys, "verify", "file", "--from", str(src), "--kind", "chars")[0] == 0
    npy = next(root.rglob("valid.npy"))
    raw = npy.read_bytes()
    npy.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))
    status, out = run(capsys, "verify", "file", "--from", str(src), "--kind", "chars")
    assert status == 1 and "valid.npy: sha256" in out and "FAILED" in out


def test_unprepared_dataset_info_and_verify(root, capsys):
    status, out = run(capsys, "info", "text8")
    assert status == 0 and "no: repro data prepare text8" in out
    status, out = run(capsys, "verify", "text8")
    assert status == 2 and "run `repro data prepare text8`" in out


def test_bad_input_exits_2_with_one_line(root, tmp_path, capsys):
    assert run(capsys, "prepare", "audio")[0] == 2
    status, out = run(capsys, "prepare", "enwik8", "--from", str(tmp_path / "missing.zip"))
    assert status == 2 and "no such file" in out
    bad = tmp_path / "enwik8.zip"
    bad.write_bytes(b"not the real archive")
    status, out = run(capsys, "prepare", "enwik8", "--from", str(bad))
    assert status == 2 and "expected 36,445,475" in out and "--allow-unverified" in out
    with pytest.raises(SystemExit):
        run(capsys, "prepare", "no-such-dataset")
