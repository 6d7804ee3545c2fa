"""What the report says while it runs: lines to stderr that also go to the folder's log.txt, and a
progress bar with an estimate of the time left for every long step (redrawn in place on a
terminal; on a pipe, a line at most every few seconds and at the end).
"""

import sys
import time

BAR = 24


class Log:
    def __init__(self, path=None, quiet=False):
        self.file = open(path, "a", encoding="utf-8") if path else None
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self._open_bar = False

    def say(self, text):
        """One line to stderr and the log file."""
        self._end_bar()
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)
        self.write(text)

    def write(self, text):
        if self.file:
            self.file.write(text + "\n")
            self.file.flush()

    def bar(self, text, final):
        """A progress line: in place on a terminal, else printed (the caller throttles it)."""
        if self.quiet:
            return
        if self.tty:
            sys.stderr.write("\r\033[K" + text + ("\n" if final else ""))
            sys.stderr.flush()
            self._open_bar = not final
        else:
            print(text, file=sys.stderr, flush=True)
        if final:
            self.write(text)

    def _end_bar(self):
        if self._open_bar:
            sys.stderr.write("\n")
            self._open_bar = False

    def close(self):
        self._end_bar()
        if self.file:
            self.file.close()
            self.file = None


def duration(s):
    s = int(round(s))
    if s < 60:
        return "%d s" % s
    if s < 3600:
        return "%d min %02d s" % (s // 60, s % 60)
    return "%d h %02d min" % (s // 3600, s % 3600 // 60)


class Progress:
    """`label [#####.....] done/total, elapsed, ~left` for one step; the estimate is linear in the
    units done (the caller may pass weights through update's `done`)."""

    def __init__(self, log, label, total, every=5.0):
        self.log, self.label, self.total = log, label, max(total, 1)
        self.t0 = time.monotonic()
        self.last = 0.0
        self.every = every
        self.done_units = 0

    def update(self, done, note="", final=False):
        self.done_units = done
        now = time.monotonic()
        if not final and not self.log.tty and now - self.last < self.every:
            return
        self.last = now
        self.log.bar(self.line(done, note, now), final)

    def line(self, done, note, now):
        frac = min(done / self.total, 1.0)
        fill = int(round(BAR * frac))
        elapsed = now - self.t0
        left = "" if done <= 0 or done >= self.total else ", ~%s left" % duration(elapsed * (self.total - done) / done)
        text = "%s [%s%s] %d/%d, %s%s" % (self.label, "#" * fill, "." * (BAR - fill), done, self.total,
                                          duration(elapsed), left)
        return text + ("  " + note if note else "")

    def finish(self, note=""):
        self.update(self.done_units, note, final=True)
