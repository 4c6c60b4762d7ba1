#!/usr/bin/env python3
"""The progress line of finish, merge and report (docs/xptrace.md): on a
terminal only, rewritten in place ("\\r"), cleared at the end ("\\r\\033[K"),
never in a pipe; with the default delay, only when the work took over a
second.  usage: test_progress.py XPTRACE GEN_TRACE SCRATCH"""
import os
import pty
import shutil
import subprocess
import sys
import time

XPTRACE, GEN, OUT = sys.argv[1:4]
CLEAR = b"\r\x1b[K"


def fail(msg):
    print("test_progress: FAIL: " + msg)
    sys.exit(1)


def run(args, tty, after=None):
    """(stdout, stderr bytes, seconds); stderr a pty when tty."""
    env = dict(os.environ)
    env.pop("XPTRACE_PROGRESS_AFTER", None)
    if after is not None:
        env["XPTRACE_PROGRESS_AFTER"] = after
    t0 = time.monotonic()
    if not tty:
        r = subprocess.run([XPTRACE] + args, cwd=OUT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        return r.stdout, r.stderr, time.monotonic() - t0, r.returncode
    master, slave = pty.openpty()
    p = subprocess.Popen([XPTRACE] + args, cwd=OUT, env=env, stdout=subprocess.PIPE,
                         stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        err += chunk
    out = p.stdout.read()
    rc = p.wait()
    os.close(master)
    return out, err.replace(b"\r\n", b"\n"), time.monotonic() - t0, rc


def shown(err, what):
    """The line was drawn and, after its last drawing, cleared."""
    start = b"\r" + what
    if start not in err:
        return False
    last = err.rfind(start)
    if err.find(CLEAR, last) < 0:
        fail("%r drawn but not cleared at the end: %r" % (what, err[-300:]))
    return True


shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(os.path.join(OUT, "run", "p-1"))
os.makedirs(os.path.join(OUT, "empty"))
subprocess.run([GEN, os.path.join(OUT, "run", "p-1", "trace.perfetto-trace"), "100", "4", "1000000"],
               check=True)
subprocess.run([GEN, os.path.join(OUT, "small.perfetto-trace"), "7", "1", "100"], check=True)

# Drawn at once (XPTRACE_PROGRESS_AFTER=0) on a terminal, for each command;
# never when stderr is a pipe; the report itself is the same either way.
cases = [(["report", "run"], b"xptrace report: reading run"),
         (["merge", "-o", "m%d.perfetto-trace", "run"], b"xptrace merge: 1 trace(s)"),
         (["finish", "empty"], b"xptrace: finishing the recordings in empty")]
for i, (args, what) in enumerate(cases):
    args = [a.replace("%d", "%d" % (2 * i)) for a in args]
    out_t, err_t, _, rc_t = run(args, True, "0")
    if not shown(err_t, what):
        fail("%s on a terminal: no progress line: %r" % (args, err_t[:300]))
    args = [a.replace("m%d" % (2 * i), "m%d" % (2 * i + 1)) for a in args]
    out_p, err_p, _, rc_p = run(args, False, "0")
    if b"\r" in err_p or what in err_p:
        fail("%s in a pipe: a progress line: %r" % (args, err_p[:300]))
    if rc_t != rc_p or (args[0] == "report" and out_t != out_p):
        fail("%s: not the same with and without the line (%d, %d)" % (args, rc_t, rc_p))

# The default delay: a quick report draws nothing; a long one draws the
# line (what the run took decides, not a guess of the machine's speed).
_, err, took, _ = run(["report", "small.perfetto-trace"], True)
if took < 0.9 and b"\r" in err:
    fail("a report of %.2f s drew a progress line: %r" % (took, err))
_, err, took, _ = run(["report", "run"], True)
drawn = shown(err, b"xptrace report: reading run")
if took > 1.6 and not drawn:
    fail("a report of %.2f s drew no progress line" % took)
if took < 0.9 and drawn:
    fail("a report of %.2f s drew a progress line" % took)
shutil.rmtree(OUT, ignore_errors=True)  # 150 MB
print("test_progress: ok (large report %.2f s, line %s)" % (took, "drawn" if drawn else "not drawn"))
