"""The program's file descriptors stay its own.  Under every in-process
mode of xptrace (collectors, function tracing, the timer sampler, causal
profiling), the descriptors fd_probe sees below the floor of
src/common/xpt_fd.h are those it has without xptrace, and its first
open() gets the same number; what we hold (recordings, libunwind's pipe)
is above.  Function tracing also runs on stripped copies of the probe,
patched before main and with compiler hooks (fd_probe_cyg beside it,
named while it runs): libdw, looking for their symbols, would start a
debuginfod client (libcurl, a socket pair) even with no server named.

usage: test_fds.py XPTRACE FD_PROBE SCRATCH MODE..."""
import os
import re
import resource
import shutil
import subprocess
import sys

xptrace, probe, scratch = sys.argv[1:4]
modes = sys.argv[4:]
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
failures = 0


def fail(msg):
    global failures
    failures += 1
    print(f"FAIL [fds]: {msg}", file=sys.stderr)


def floor():
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return 512
    if soft > 1024:
        return 1000
    return soft // 2 if soft >= 64 else 3


def seen(cmd, name):
    p = subprocess.run(cmd, cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120)
    if p.returncode != 0:
        fail(f"{name}: exit {p.returncode}: {p.stderr}")
    first, fds = None, {}
    for line in p.stdout.splitlines():
        if line.startswith("first "):
            first = int(line.split()[1])
        elif line.startswith("fd "):
            _, n, target = line.split(" ", 2)
            fds[int(n)] = re.sub(r"\[\d+\]", "", target)  # pipes and sockets by kind
    return first, fds, p.stderr


high = floor()
want_first, want, _ = seen([probe], "bare")
low_want = {n: t for n, t in want.items() if n < high}
runs = {
    "run": ["run"],
    "text": ["run", "-c", "perfetto,stats,text"],
    "functions": ["run", "--functions", "probe_spin", "-c", "perfetto"],
    "functions-stripped": ["run", "--functions", "probe_spin", "-c", "perfetto"],
    "functions-cyg-stripped": ["run", "--functions", "-c", "perfetto"],
    "run-sample": ["run", "--sample", "--method", "timer", "-c", "perfetto"],
    "timer": ["sample", "--method", "timer", "-f", "1000"],
    "causal": ["causal"],
}
for mode in modes:
    args = runs[mode]
    prog = probe
    if mode in ("functions-stripped", "functions-cyg-stripped"):
        src = probe + "_cyg" if mode == "functions-cyg-stripped" else probe
        prog = os.path.join(scratch, os.path.basename(src) + "_stripped")
        subprocess.run(["objcopy", "--strip-all", src, prog], check=True)
    first, fds, err = seen([xptrace] + args + ["-o", f"out-{mode}", "--", prog], mode)
    low = {n: t for n, t in fds.items() if n < high}
    if first != want_first:
        fail(f"{mode}: the program's first open() got {first}, without xptrace {want_first}")
    if low != low_want:
        fail(f"{mode}: descriptors below {high} {low}, without xptrace {low_want}")
    ours = {n: t for n, t in fds.items() if n >= high and n not in want}
    print(f"{mode}: ours above {high}: {sorted(ours.values())}")
    # The mode really held something (else the test proves nothing).
    held = {"run": "events.xprec", "text": "text.log", "functions": "events.xprec",
            "functions-stripped": "events.xprec", "functions-cyg-stripped": "events.xprec",
            "run-sample": "samples.xsamp",
            "timer": "samples.xsamp", "causal": ".coz"}[mode]
    if not any(t.endswith(held) for t in ours.values()):
        fail(f"{mode}: nothing of ours held above {high} ({held}): {ours} {err}")
    # libunwind's pipe (two ends) beside the saved stderr (a pipe here).
    pipes = sum(t == "pipe:" for t in ours.values())
    if mode in ("run-sample", "timer") and pipes < 3:
        fail(f"{mode}: libunwind's pipe not above {high}: {ours}")
if failures:
    sys.exit(1)
print(f"ok: {len(modes)} modes, first open() {want_first}, {len(low_want)} descriptors below {high}")
