"""canvas.diff_view: git's unified diffs read into files, hunks and numbered lines, and hunks
paired side by side."""

from __future__ import annotations

import subprocess
from pathlib import Path

from canvas.diff_view import Hunk, Line, parse, split_rows, unquote

MODIFIED = """\
diff --git a/app.py b/app.py
index 1111111..2222222 100644
--- a/app.py
+++ b/app.py
@@ -1,4 +1,5 @@ def main():
 import os
-x = 1
-y = 2
+x = 10
+y = 20
+z = 30
 print(x)
@@ -10,2 +11,2 @@
--- not a header, a removed line
+++ not a header, an added line
 end
"""


def test_a_modified_file_numbers_its_lines_in_both_files():
    [diff] = parse(MODIFIED)
    assert (diff.old_path, diff.new_path, diff.status, diff.binary) == (
        "app.py", "app.py", "modified", False,
    )  # fmt: skip
    first, second = diff.hunks
    assert (first.old_start, first.old_count, first.new_start, first.new_count) == (1, 4, 1, 5)
    assert first.section == "def main():"
    assert first.header == "@@ -1,4 +1,5 @@"
    assert first.lines == [
        Line("ctx", "import os", 1, 1),
        Line("del", "x = 1", 2, None),
        Line("del", "y = 2", 3, None),
        Line("add", "x = 10", None, 2),
        Line("add", "y = 20", None, 3),
        Line("add", "z = 30", None, 4),
        Line("ctx", "print(x)", 4, 5),
    ]
    # Inside a hunk, lines that look like file headers are the hunk's own.
    assert second.lines == [
        Line("del", "-- not a header, a removed line", 10, None),
        Line("add", "++ not a header, an added line", None, 11),
        Line("ctx", "end", 11, 12),
    ]
    assert (diff.added, diff.removed) == (4, 3)


def test_added_deleted_and_binary_files():
    text = """\
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000..3b18e51
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+hello
\\ No newline at end of file
diff --git a/old.txt b/old.txt
deleted file mode 100644
index 3b18e51..0000000
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-gone
-soon
diff --git a/logo.png b/logo.png
new file mode 100644
index 0000000..aaaaaaa
Binary files /dev/null and b/logo.png differ
"""
    new, old, binary = parse(text)
    assert (new.status, new.old_path, new.new_path, new.path) == (
        "added",
        None,
        "new.txt",
        "new.txt",
    )
    assert new.hunks[0].lines == [Line("add", "hello", None, 1, no_newline=True)]
    assert new.hunks[0].old_count == 0 and new.hunks[0].new_count == 1  # "+1" means one line
    assert (old.status, old.old_path, old.new_path, old.path) == (
        "deleted",
        "old.txt",
        None,
        "old.txt",
    )
    assert [line.old for line in old.hunks[0].lines] == [1, 2]
    assert (binary.status, binary.binary, binary.hunks, binary.path) == (
        "added",
        True,
        [],
        "logo.png",
    )


def test_renames_copies_and_quoted_names():
    text = """\
diff --git a/src/old name.py b/src/new name.py
similarity index 90%
rename from src/old name.py
rename to src/new name.py
index 1..2 100644
--- a/src/old name.py\t
+++ b/src/new name.py\t
@@ -1 +1 @@
-a
+b
diff --git a/same.py b/copy.py
similarity index 100%
copy from same.py
copy to copy.py
diff --git "a/t\\303\\251st\\tx" "b/t\\303\\251st\\tx"
index 1..2 100644
Binary files "a/t\\303\\251st\\tx" and "b/t\\303\\251st\\tx" differ
"""
    renamed, copied, quoted = parse(text)
    assert (renamed.status, renamed.old_path, renamed.new_path) == (
        "renamed", "src/old name.py", "src/new name.py",
    )  # fmt: skip
    assert [line.kind for line in renamed.hunks[0].lines] == ["del", "add"]
    assert (copied.status, copied.old_path, copied.new_path, copied.hunks) == (
        "copied", "same.py", "copy.py", [],
    )  # fmt: skip
    assert (quoted.status, quoted.path, quoted.binary) == ("modified", "tést\tx", True)
    assert unquote('"a\\"b\\\\c\\nd"') == 'a"b\\c\nd'
    assert unquote("plain") == "plain"


def test_a_plain_unified_diff_and_a_cut_one():
    text = """\
--- a.txt\t2026-01-01 10:00:00
+++ a.txt\t2026-01-02 10:00:00
@@ -1,2 +1,2 @@
-one
+uno
 two
--- b.txt
+++ b.txt
@@ -5,3 +5,3 @@
 five
-six
"""
    first, second = parse(text)
    assert (first.path, first.status, len(first.hunks[0].lines)) == ("a.txt", "modified", 3)
    # The second hunk announced 3 old lines and 3 new ones but was cut after two lines.
    assert second.path == "b.txt"
    assert second.hunks[0].lines == [Line("ctx", "five", 5, 5), Line("del", "six", 6, None)]
    assert parse("") == [] and parse("no diff here\n") == []


def test_only_a_newline_ends_a_line():
    text = "--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-a\x0cb\n+a\u2028b\n+c\r\n"
    [diff] = parse(text)
    assert diff.hunks[0].lines == [
        Line("del", "a\x0cb", 1, None), Line("add", "a\u2028b", None, 1), Line("add", "c\r", None, 2),
    ]  # fmt: skip


def test_split_rows_pair_removals_with_the_additions_that_follow():
    ctx, d1, d2, a1, a2, a3 = (
        Line("ctx", "c", 1, 1),
        Line("del", "d1", 2, None),
        Line("del", "d2", 3, None),
        Line("add", "a1", None, 2),
        Line("add", "a2", None, 3),
        Line("add", "a3", None, 4),
    )
    hunk = Hunk(1, 3, 1, 4, "", [ctx, d1, d2, a1, a2, a3, ctx])
    assert [(r.old, r.new) for r in split_rows(hunk)] == [
        (ctx, ctx), (d1, a1), (d2, a2), (None, a3), (ctx, ctx),
    ]  # fmt: skip
    # An addition then a removal are two runs, not one pair.
    hunk = Hunk(1, 1, 1, 1, "", [a1, d1])
    assert [(r.old, r.new) for r in split_rows(hunk)] == [(None, a1), (d1, None)]
    hunk = Hunk(1, 2, 1, 0, "", [d1, d2])
    assert [(r.old, r.new) for r in split_rows(hunk)] == [(d1, None), (d2, None)]


def test_what_git_itself_prints_parses_back_to_the_files(tmp_path: Path):
    """A real repository's `git diff` (rename detection on): the parsed lines rebuild both
    versions of each file."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path, check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip

    before = "".join(f"line {i}\n" for i in range(1, 40))
    after = before.replace("line 3\n", "line three\n").replace("line 30\n", "")
    (tmp_path / "a.txt").write_text(before)
    (tmp_path / "moved.txt").write_text("same\n" * 20)
    (tmp_path / "gone.txt").write_text("bye\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "one")
    (tmp_path / "a.txt").write_text(after)
    (tmp_path / "moved.txt").rename(tmp_path / "renamed.txt")
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "blob.bin").write_bytes(b"\0\1\2")
    git("add", "-A")
    files = {f.path: f for f in parse(git("diff", "--cached", "-M", "--no-color", "HEAD"))}
    assert {p: f.status for p, f in files.items()} == {
        "a.txt": "modified", "blob.bin": "added", "gone.txt": "deleted", "renamed.txt": "renamed",
    }  # fmt: skip
    assert files["renamed.txt"].old_path == "moved.txt" and files["blob.bin"].binary
    changed = files["a.txt"]
    old_lines = dict(enumerate(before.splitlines(), 1))
    new_lines = dict(enumerate(after.splitlines(), 1))
    for hunk in changed.hunks:
        for line in hunk.lines:
            if line.old is not None:
                assert old_lines[line.old] == line.text
            if line.new is not None:
                assert new_lines[line.new] == line.text
    assert (changed.added, changed.removed) == (1, 2)
