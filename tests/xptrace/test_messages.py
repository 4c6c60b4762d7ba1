#!/usr/bin/env python3
"""What xptrace says is true and short (issue 30).

  test_messages.py XPTRACE SCRATCH

- `run --counters` of a program that makes no XPTI call names the
  counters file it wrote (which exists) and never says "no events";
- an output folder that cannot be created is one line (exit 2), not the
  usage;
- an option or subcommand typo gets "did you mean" with the right name;
  a word close to nothing gets none;
- `xptrace --help` names every subcommand, and each one's --help works."""
import os
import re
import shutil
import subprocess
import sys

XPTRACE, SCRATCH = sys.argv[1:3]
SUBCOMMANDS = ["run", "sample", "finish", "merge", "report", "avail", "causal"]


def fail(msg):
    print("test_messages: FAIL: " + msg)
    sys.exit(1)


def xp(*args):
    r = subprocess.run([XPTRACE] + list(args), cwd=SCRATCH, capture_output=True, text=True,
                       timeout=120)
    return r.returncode, r.stdout, r.stderr


shutil.rmtree(SCRATCH, ignore_errors=True)
os.makedirs(SCRATCH)

# counters of a program with no XPTI call
rc, _, err = xp("run", "--counters", "default", "-o", "c", "--", "sh", "-c",
                "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done")
m = re.search(r"^xptrace: counters (\S+)", err, re.M)
if rc != 0 or not m or not os.path.isfile(m.group(1)):
    fail("the counters file is not named, or not there (exit %d):\n%s" % (rc, err))
if "no events" in err:
    fail("'no events' said of a run whose counters were recorded:\n" + err)

# a folder that cannot be created
open(os.path.join(SCRATCH, "plain"), "w").close()
for sub in (["run"], ["sample"]):
    rc, _, err = xp(*sub, "-o", "plain/out", "--", "true")
    if rc != 2 or err.count("\n") != 1 or "usage:" in err or "plain/out" not in err:
        fail("%s -o plain/out: exit %d, not one line:\n%s" % (sub[0], rc, err))

# typos
for args, want in ((["run", "--functons", "--", "true"], "did you mean --functions?"),
                   (["sample", "--freqq", "5", "--", "true"], "did you mean --freq?"),
                   (["report", "--formt=csv", "x"], "did you mean --format?"),
                   (["reprot", "x"], "did you mean report?"),
                   (["--hlep"], "did you mean --help?")):
    rc, _, err = xp(*args)
    if rc != 2 or want not in err.splitlines()[0]:
        fail("%s: exit %d, first line not '... %s':\n%s" % (" ".join(args), rc, want, err))
rc, _, err = xp("run", "--zzzzzzzz", "--", "true")
if rc != 2 or "did you mean" in err:
    fail("no suggestion for a word close to no option:\n" + err)

# --help lists every subcommand
rc, out, _ = xp("--help")
for s in SUBCOMMANDS:
    if not re.search(r"^\s*(usage: )?xptrace %s\b" % s, out, re.M):
        fail("xptrace --help does not list '%s':\n%s" % (s, out))
    src, sout, _ = xp(s, "--help")
    if src != 0 or not sout:
        fail("xptrace %s --help: exit %d" % (s, src))
print("test_messages: OK")
