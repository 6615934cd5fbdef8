#!/usr/bin/python3
"""scripts/check-docs on tests/docs_check/fixture.md: every kind of block and
marker, the exact report lines, the exit status, and no process left behind.

Usage: test_check_docs.py SOURCE_DIR BUILD_DIR (ctest docs.check_docs)."""

import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE, BUILD = (os.path.realpath(a) for a in sys.argv[1:3])
CHECK = os.path.join(SOURCE, "scripts", "check-docs")
FIXTURE = os.path.join(SOURCE, "tests", "docs_check", "fixture.md")
PAGE = "tests/docs_check/fixture.md"


def netns_works():
    if os.geteuid() != 0:
        return False
    try:
        return subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=10).returncode == 0
    except OSError:
        return False


class CheckDocs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        env = dict(os.environ, DOCS_CHECK_TEST_DIR=cls.tmp.name, INA_SWITCH="10.0.0.1:1")
        t0 = time.monotonic()
        r = subprocess.run([CHECK, "--root", SOURCE, "--build", BUILD, FIXTURE], capture_output=True, env=env,
                           timeout=120)
        cls.elapsed = time.monotonic() - t0
        cls.rc = r.returncode
        cls.out = r.stdout.decode()
        cls.err = r.stderr.decode()
        # report lines without their measured times
        cls.lines = [s if s.startswith("    |") else re.sub(r"; \d+\.\d s", "", re.sub(r" \(\d+\.\d s\)$", "", s))
                     for s in cls.out.rstrip("\n").split("\n")]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_report(self):
        if netns_works():
            root_line = f"{PAGE}:60 ok"
        elif os.geteuid() != 0:
            root_line = f"{PAGE}:60 skipped: needs root and network namespaces (not running as root)"
        else:  # root without a working `ip netns`: the reason names what failed
            root_line = next(s for s in self.lines if s.startswith(f"{PAGE}:60 "))
            self.assertTrue(root_line.startswith(f"{PAGE}:60 skipped: needs root and network namespaces ("))
        status = [s for s in self.lines if s.startswith(PAGE)]
        expected = [
            f"{PAGE}:5 ok",
            f"{PAGE}:14 FAILED (exit status 1)",
            f"{PAGE}:21 skipped: a synopsis, its arguments to be filled in",
            f"{PAGE}:32 long: not run (--long runs it)",
            f"{PAGE}:37 FAILED (shell syntax error (bash -n))",
            f"{PAGE}:48 ok",
            f"{PAGE}:55 FAILED (timed out after 1 s)",
            root_line,
            f"{PAGE}:64 ok",
            f"{PAGE}:71 FAILED (unknown docs-check marker 'quick' (known: skip: REASON, long, background, root, "
            "timeout=S))",
            f"{PAGE}:75 FAILED (fence without an info string (sh/python to run it, text for output, "
            "toml/cpp/... for code))",
            f"{PAGE}:79 FAILED (runs sudo: mark it <!-- docs-check: root --> (run only as root with network "
            "namespaces))",
            f"{PAGE}:84 FAILED (names files the repository does not have: scenarios/dsa/no_such_figure.toml, "
            "scripts/no-such-script)",
            f"{PAGE}:42 ok (background, stopped after the page)",
        ]
        self.assertEqual(status, expected, self.out)

    def test_summary_and_exit_status(self):
        self.assertEqual(self.rc, 1, self.out + self.err)
        ran_root = netns_works()
        self.assertIn(f"check-docs: {4 + ran_root} ok, 7 failed, {2 - ran_root} skipped, 1 long (not run; "
                      "--long runs them)", self.out)
        self.assertIn(f"failed: {PAGE}:14 {PAGE}:37 {PAGE}:55 {PAGE}:71 {PAGE}:75 {PAGE}:79 {PAGE}:84", self.out)

    def test_failed_block_shows_its_tail(self):
        i = self.lines.index(f"{PAGE}:14 FAILED (exit status 1)")
        self.assertEqual(self.lines[i + 1], "    | before the failure")
        self.assertNotIn("never printed", self.out)
        i = self.lines.index(f"{PAGE}:37 FAILED (shell syntax error (bash -n))")
        self.assertIn("syntax error", self.lines[i + 1])

    def test_background_and_timed_out_blocks_are_stopped(self):
        with open(os.path.join(self.tmp.name, "background.pid")) as f:
            pid = int(f.read())
        with self.assertRaises(ProcessLookupError):
            os.kill(pid, 0)
        # sleep 600 (background) and sleep 30 (timeout=1) were both cut short
        self.assertLess(self.elapsed, 25)

    def test_list(self):
        r = subprocess.run([CHECK, "--root", SOURCE, "--build", BUILD, "--list", FIXTURE], capture_output=True)
        self.assertEqual(r.returncode, 0)
        self.assertIn(f"{PAGE}:42 [sh] background", r.stdout.decode())
        self.assertIn(f"{PAGE}:21 [sh] skip: a synopsis, its arguments to be filled in", r.stdout.decode())

    def test_missing_build_is_a_usage_error(self):
        r = subprocess.run([CHECK, "--root", SOURCE, "--build", self.tmp.name, FIXTURE], capture_output=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"--build {os.path.realpath(self.tmp.name)}: no executable 'ina' there", r.stderr.decode())


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + sys.argv[3:], verbosity=2)
