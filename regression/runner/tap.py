"""Printing TAP: numbered test lines, skips and '#   ' diagnostics, flushed
line by line so that make check's log follows a long invocation."""

import sys


class Tap:
    def __init__(self):
        self.n = 0                # tests printed
        self.failed = 0           # of them 'not ok'

    def test(self, ok, text, diag=()):
        self.n += 1
        if not ok:
            self.failed += 1
        print("%s %d - %s" % ("ok" if ok else "not ok", self.n, text))
        for line in diag:
            print("#   " + line)
        sys.stdout.flush()

    def skip(self, text, reason):
        self.n += 1
        print("ok %d - %s # SKIP %s" % (self.n, text, reason))
        sys.stdout.flush()

    def plan(self):
        print("1..%d" % self.n)
