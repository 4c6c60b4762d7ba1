#!/usr/bin/env python3
"""Run a fixture of known shape under `xptrace run --functions` and check
the exact slice counts (stats.csv and the trace), the nesting (the trace
checker; no unmatched end or unclosed begin in the statistics), and that
the program's output and exit status are its own.

  test_functions.py CASE XPTRACE FIXTURE CHECK_TRACE PROTO SCRATCH

CASE is WAY-SCENARIO; WAY says how the fixture was built (cyg:
-finstrument-functions, pg: -pg -mfentry -mnop-mcount, mcount: -pg,
fentry: -pg -mfentry, pfe:
-fpatchable-function-entry=5, plain: nothing, cxx-*: the C++ fixture)."""
import csv
import glob
import os
import re
import shutil
import subprocess
import sys

CALLS = {"loop_leaf": 1, "leaf": 1000, "recurse": 6, "via_ptr": 3, "tail_from": 3, "tail_to": 3,
         "rare": 5, "cold_note": 2}
LONGJMP = {"jumper": 1, "deep1": 1, "deep2": 1, "after_jump": 1}
CANCEL = {"cancel_thread": 1, "cancel_outer": 1, "cancel_inner": 1}
THREADS = {"worker_thread": 4, "worker": 4, "loop_leaf": 4, "leaf": 1000}
EXIT = {"exit_deep1": 1, "exit_deep2": 1}
JUMPS = {"jumps_outer": 3, "jdeep1": 3, "jdeep2": 3, "spin_for": 3, "after_jump": 3,
         "pexit_thread": 1, "pexit_deep1": 1, "pexit_deep2": 1, "pexit_cleanup": 1}
JUMPED = {"jdeep1": 3, "jdeep2": 3, "after_jump": 3, "pexit_deep2": 1, "pexit_cleanup": 1}
CXX = {"catcher": 3, "mid": 3, "thrower": 3, "cleanup_fn": 3, "after_catch": 3,
       "Guard::~Guard()": 3, "main": 1}



# With no filter the functions of an unmodified program that cannot be
# patched are counted in one line (tiny_fn, one byte, in the fixture).
SKIPPED = re.compile(r"^xpti: functions: \d+ functions of \S+ traced, 1 left alone \(0 with no size, "
                     r"1 shorter than 5 bytes, 0 whose first instructions cannot be moved; ")


def process_dir(out):
    """xptrace run writes one folder per process: the fixture's is the only one."""
    dirs = [d for d in glob.glob(os.path.join(out, "*", "stats.csv"))]
    if len(dirs) != 1:
        fail("expected one process folder with stats.csv in %s, found %r" % (out, dirs))
    return os.path.dirname(dirs[0])

def merged(*parts):
    out = {}
    for p in parts:
        for k, v in p.items():
            out[k] = out.get(k, 0) + v
    return out


# scenario -> (fixture argument, options, expected counts, status, threads)
SCENARIOS = {
    "calls": ("calls", [], merged({"main": 1}, CALLS), 0, 1),
    "longjmp": ("longjmp", [], merged({"main": 1}, LONGJMP), 0, 1),
    "exit": ("exit", [], merged({"main": 1}, EXIT), 3, 1),
    "cancel": ("cancel", [], merged({"main": 1}, CANCEL), 0, 2),
    "threads": ("threads", [], merged({"main": 1}, THREADS), 0, 5),
    # Filters: the selection, an exclusion, a depth, a minimum duration.
    # A filter is searched in the name (uftrace's -F): ^ and $ anchor it;
    # several accumulate.  "leaf" alone is found in loop_leaf too.
    "select": ("calls", ["--functions", "^leaf$", "--functions", "recurse"],
               {"leaf": 1000, "recurse": 6}, 0, 1),
    "search": ("calls", ["--functions", "leaf"], {"leaf": 1000, "loop_leaf": 1}, 0, 1),
    "exclude": ("calls", ["--exclude", "^leaf$", "--exclude", "main|tail_to"],
                {"loop_leaf": 1, "recurse": 6, "via_ptr": 3, "tail_from": 3, "rare": 5,
                 "cold_note": 2}, 0, 1),
    # main is depth 1, recurse(5) 2, recurse(4) 3; deeper calls unrecorded.
    # tail_to is depth 3 (compiler hooks) or takes tail_from's place at 2.
    "depth": ("calls", ["--depth", "3"], {"main": 1, "loop_leaf": 1, "leaf": 1000, "recurse": 2,
                                           "via_ptr": 3, "tail_from": 3, "tail_to": 3,
                                           "rare": 5, "cold_note": 2}, 0, 1),
    # Every function, the C library's calls too: the fixture's counts among
    # them (never a cold part as a function); _setjmp refused.
    "all": ("calls", ["--functions", ".*"], merged({"main": 1}, CALLS), 0, 1),
    # A C library function named: traced at the program's call sites.
    "libc": ("calls", ["--functions", "^(getpid|leaf)$"], {"getpid": 7, "leaf": 1000}, 0, 1),
    # Only calls that last 1 ms: cancel_inner waits (>= 1 ms) until it is
    # cancelled, and its callers with it; nothing else in "cancel" does.
    "minimum": ("cancel", ["--min-duration", "1ms"], {"cancel_thread": 1, "cancel_outer": 1,
                                                       "cancel_inner": 1, "main": 1}, 0, 2),
    "cxx": ("", [], CXX, 0, 1),
    # Caught in a frame not traced; caught inside a destructor while an
    # exception unwinds; a thread's pthread_exit through a destructor.
    "cxxf": ("", ["--functions", "^(mid|thrower|cleanup_fn)$"],
             {"mid": 3, "thrower": 3, "cleanup_fn": 3}, 0, 1),
    "cxxnested": ("nested", [], {"main": 1, "ncatcher": 1, "nmid": 1, "thrower": 2,
                                 "NestedGuard::~NestedGuard()": 1, "inner_caught": 1}, 0, 1),
    "cxxexit": ("exit", [], {"main": 1, "texit_thread": 1, "texit_mid": 1, "texit_deep": 1,
                             "Counted::~Counted()": 1, "cleanup_fn": 1}, 0, 2),
    # longjmp, siglongjmp, _longjmp and pthread_exit past traced calls:
    # every frame traced, then only the jumped ones (the frame the jump
    # lands in untraced: nothing ends them but the jump).
    # Nothing traced after the jump: the jumped frames' slots are dead
    # stack (restoring them at exit once crashed the program).
    "longjmpf": ("longjmp", ["--functions", "^(deep1|deep2)$"], {"deep1": 1, "deep2": 1}, 0, 1),
    # A coroutine (makecontext, swapcontext): calls open at a switch end there.
    "context": ("context", [], {"main": 1, "ctx_caller": 1, "coro_fn": 1, "coro_leaf": 4}, 0, 1),
    # A known call tree, every function (no filter): fib(15).
    "fib": ("fib", [], {"main": 1, "fib": 1973}, 0, 1),
    "jumps": ("jumps", [], merged({"main": 1}, JUMPS), 0, 2),
    "jumpsf": ("jumps", ["--functions", "^(%s)$" % "|".join(sorted(JUMPED))], JUMPED, 0, 2),
    # Every function of the C++ fixture and of libstdc++ (patched: the
    # program needs it), exceptions thrown through them: the fixture's
    # counts among the rest (SUBSET), nothing unpaired.
    "cxxall": ("", ["--functions", ".*"], CXX, 0, 1),
    # The fixture stripped, its symbols in a debug file found by its debug
    # link; then stripped with no debug file (nothing it exports matches).
    "stripped": ("calls", ["--functions", "^(leaf|recurse)$"], {"leaf": 1000, "recurse": 6},
                 0, 1),
    "nodebug": ("calls", ["--functions", "^(leaf|recurse)$"], {}, 0, 1),
    # A timer's signal every 50 us on the tracing thread, its handler traced
    # (every 10 us starved the traced loop on a guest where a signal costs ~10 us).
    "signals": ("signals", [], {"main": 1, "run_signals": 1, "signal_loop": 1, "leaf": 20000},
                0, 1),
    # 302 calls open at once, 50 times; then again in a buffer whose
    # chunks hold the ends of fewer (see deep_small).
    "deep": ("deep", [], {"main": 1, "deep_loop": 1, "descend": 15000}, 0, 1),
    # A fork inside forker: the child's returns through forker and main
    # are not slices of the child (begun in the parent); two processes.
    "fork": ("fork", [], {"main": 1, "forker": 1, "loop_leaf": 1, "leaf": 1000}, 0, 2),
}
# Functions whose count is not fixed: a handler's calls that interrupt a
# hook are not recorded (by design: nothing of ours is reentered), so at
# least one and no more than the signals; the same count for each.
VARIABLE = {"signals": ("on_timer", "in_handler")}
# Scenarios whose counts are checked for the fixture's functions only (a
# library's are traced too); "cannot patch" lines are expected.
SUBSET = {"all", "cxxall"}


def strip_copy(fixture, scratch, keep_debug):
    """A stripped copy of the fixture, with a debug link to a file of its
    symbols beside it when keep_debug."""
    prog = os.path.join(scratch, "prog")
    shutil.copy(fixture, prog)
    if keep_debug:
        subprocess.run(["objcopy", "--only-keep-debug", prog, prog + ".debug"], check=True)
    subprocess.run(["strip", "--strip-all", prog], check=True)
    if keep_debug:
        subprocess.run(["objcopy", "--add-gnu-debuglink=" + prog + ".debug", prog], check=True)
    return prog


def fail(msg):
    print("test_functions: FAIL: " + msg)
    sys.exit(1)


def debian(xptrace, scratch):
    """Debian's own python3.11 (stripped; its API functions are in the
    dynamic symbol table), unmodified: PyImport_ImportModule counted by
    xptrace and by uftrace (its own run-time patching) must agree."""
    py = "/usr/bin/python3.11"
    uftrace = shutil.which("uftrace")
    if not os.access(py, os.X_OK) or not uftrace:
        print("test_functions: SKIP: needs %s and uftrace" % py)
        sys.exit(77)
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    prog = [py, "-c", "import json, csv, email.message; print(json.dumps([1, 2]))"]
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
    alone = subprocess.run(prog, capture_output=True, text=True, env=env, timeout=60)
    out = os.path.join(scratch, "out")
    run = subprocess.run([xptrace, "run", "-o", out, "-c", "stats", "--functions",
                          "^PyImport_ImportModule$", "--"] + prog,
                         capture_output=True, text=True, env=env, timeout=60)
    print(run.stderr)
    if run.returncode != 0 or run.stdout != alone.stdout:
        fail("status %d, output %r (alone %r)" % (run.returncode, run.stdout, alone.stdout))
    with open(os.path.join(process_dir(out), "stats.csv"), newline="") as f:
        ours = [int(r["count"]) for r in csv.DictReader(f) if r["name"] == "PyImport_ImportModule"]
    ud = os.path.join(scratch, "uftrace.data")
    subprocess.run([uftrace, "record", "--no-libcall", "-d", ud, "-P", "^PyImport_ImportModule$"]
                   + prog, capture_output=True, env=env, timeout=120, check=True)
    rep = subprocess.run([uftrace, "report", "-d", ud, "-f", "call"], capture_output=True,
                         text=True, timeout=60).stdout
    theirs = [int(l.split()[0]) for l in rep.splitlines()
              if l.split() and l.split()[-1] == "PyImport_ImportModule"]
    print("xptrace %s, uftrace %s" % (ours, theirs))
    if not ours or ours != theirs or ours[0] < 10:
        fail("PyImport_ImportModule: xptrace counted %s, uftrace %s" % (ours, theirs))
    print("test_functions: OK")


def debian_lib(xptrace, scratch):
    """A library function of an unmodified Debian program: zlib's crc32,
    which Debian's python3.11 calls once per zlib.crc32() of a short
    buffer, and nothing else calls in a run that imports nothing; and the
    C library's getpid, once per os.getpid(), traced at python's call
    sites (python binds lazily: the slot is bound first).  N calls must
    count N exactly, for two N.  Then every
    function of the program and its libraries ('.*': libdw reads their
    symbols through zlib while they are being patched): the same output,
    crc32 still exact, every slice whole."""
    py = "/usr/bin/python3.11"
    if not os.access(py, os.X_OK):
        print("test_functions: SKIP: needs %s" % py)
        sys.exit(77)
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    code = ("import os, sys, zlib\nfor _ in range(int(sys.argv[1])): zlib.crc32(b'abc'); os.getpid()"
            "\nprint('done')")
    for n in (1000, 3000):
        prog = [py, "-S", "-c", code, str(n)]
        alone = subprocess.run(prog, capture_output=True, text=True, timeout=60)
        out = os.path.join(scratch, "out-%d" % n)
        run = subprocess.run([xptrace, "run", "-o", out, "-c", "stats", "--functions",
                              "^(crc32|getpid)$", "--"] + prog,
                             capture_output=True, text=True, timeout=60)
        print(run.stderr)
        if run.returncode != 0 or run.stdout != alone.stdout or alone.stdout != "done\n":
            fail("status %d, output %r (alone %r)" % (run.returncode, run.stdout, alone.stdout))
        with open(os.path.join(process_dir(out), "stats.csv"), newline="") as f:
            got = {r["name"]: int(r["count"]) for r in csv.DictReader(f)}
        if got != {"crc32": n, "getpid": n}:
            fail("%d calls of zlib.crc32 and os.getpid: counted %s" % (n, got))
    prog = [py, "-S", "-c", code, "1000"]
    out = os.path.join(scratch, "out-all")
    run = subprocess.run([xptrace, "run", "-o", out, "-c", "stats", "--functions", ".*", "--"]
                         + prog, capture_output=True, text=True, timeout=120)
    print("\n".join(l for l in run.stderr.splitlines() if "cannot patch" not in l))
    if run.returncode != 0 or run.stdout != "done\n":
        fail("'.*': status %d, output %r" % (run.returncode, run.stdout))
    with open(os.path.join(process_dir(out), "stats.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    crc = [int(r["count"]) for r in rows if r["name"] == "crc32"]
    if crc != [1000] or len(rows) < 100:
        fail("'.*': crc32 counted %s in %d rows, expected [1000] in 100 or more" % (crc, len(rows)))
    if "unmatched ends 0, unclosed begins 0, dropped 0" not in run.stderr:
        fail("'.*': unpaired or dropped halves")
    # Four threads: their ends free memory through python's traced free in
    # TLS destructors after our thread state has ended (it recorded those
    # as new threads, and dropped their halves).
    threads = ("import threading, zlib\n"
               "def f():\n    for _ in range(200): zlib.crc32(b'x' * 10000)\n"
               "ts = [threading.Thread(target=f) for _ in range(4)]\n"
               "[t.start() for t in ts]; [t.join() for t in ts]; print('done')")
    out = os.path.join(scratch, "out-threads")
    run = subprocess.run([xptrace, "run", "-o", out, "-c", "stats", "--functions", ".*", "--",
                          py, "-S", "-c", threads], capture_output=True, text=True, timeout=120)
    print("\n".join(l for l in run.stderr.splitlines() if "cannot patch" not in l))
    if run.returncode != 0 or run.stdout != "done\n":
        fail("threads: status %d, output %r" % (run.returncode, run.stdout))
    with open(os.path.join(process_dir(out), "stats.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    crc = [int(r["count"]) for r in rows if r["name"] == "crc32"]
    # A worker can still be inside its last calls when the process exits:
    # a busy machine let python's main thread finish while a worker was in
    # pthread_mutex_unlock under _PyThreadState_DeleteCurrent (2 of 12
    # runs, the code before this stop as well).  Those begins are truly
    # never ended; at most two per worker, and never an end without its
    # begin or a drop.
    unclosed = sum(int(r["unclosed_begins"]) for r in rows)
    if crc != [800] or "python3.11, 5 thread(s)" not in run.stderr or unclosed > 8 or \
            not re.search(r"unmatched ends 0, unclosed begins \d+, dropped 0", run.stderr):
        fail("threads: crc32 %s, expected [800] on 5 threads, nothing dropped, %d unclosed" %
             (crc, unclosed))
    print("test_functions: OK")


def default(xptrace, fixture, scratch):
    """`xptrace run --functions` without -c: the trace collector alone, no
    statistics files, and the per-function table read back from the trace
    at the end, with the exact counts."""
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    out = os.path.join(scratch, "out")
    alone = subprocess.run([fixture, "calls"], capture_output=True, text=True, timeout=60)
    run = subprocess.run([xptrace, "run", "-o", out, "--functions", "--", fixture, "calls"],
                         capture_output=True, text=True, timeout=60)
    print(run.stderr)
    if run.returncode != 0 or run.stdout != alone.stdout:
        fail("status %d, output %r (alone %r)" % (run.returncode, run.stdout, alone.stdout))
    if glob.glob(os.path.join(out, "*", "stats.csv")) or "xptrace: statistics" in run.stderr:
        fail("statistics written without -c stats")
    if not os.path.exists(os.path.join(out, "trace.perfetto-trace")):
        fail("no trace")
    lines = run.stderr.splitlines()
    if "Trace points (slices on threads)" not in lines:
        fail("no per-function table")
    start = lines.index("Trace points (slices on threads)") + 2  # past the column names
    got = {}
    for line in lines[start:]:
        f = line.split()
        if len(f) < 3 or f[1] != "xptrace.functions":
            break
        got[f[0]] = int(f[2])
    got = {n: k for n, k in got.items() if not n.startswith(("_sub_I_", "_sub_D_"))}
    want = merged({"main": 1, "inlined_add": 3}, CALLS)  # cyg: the inlined function too
    if got != want:
        fail("table counts %s, expected %s" % (sorted(got.items()), sorted(want.items())))
    print("test_functions: OK")


def main():
    case, xptrace, fixture, checker, proto, scratch = sys.argv[1:7]
    if case == "debian":
        debian(xptrace, scratch)
        return
    if case == "default":
        default(xptrace, fixture, scratch)
        return
    if case == "debian-lib":
        debian_lib(xptrace, scratch)
        return
    way, scenario = case.split("-", 1)
    arg, opts, expect, status, threads = SCENARIOS[scenario]
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    out = os.path.join(scratch, "out")
    if scenario in ("stripped", "nodebug"):
        fixture = strip_copy(fixture, scratch, scenario == "stripped")
    # A ring of 16 MiB: a runaway run cannot fill the disk.
    cmd = [xptrace, "run", "-o", out, "-c", "perfetto,stats", "--buffer-size", "16M",
           "--buffer-policy", "ring"] + opts
    if "--functions" not in opts:
        cmd.append("--functions")
    cmd += ["--", fixture] + ([arg] if arg else [])
    alone = subprocess.run([fixture] + ([arg] if arg else []), capture_output=True, text=True,
                           timeout=60)
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    print(" ".join(cmd))
    print(run.stderr)
    if run.returncode != status or alone.returncode != status:
        fail("status %d traced, %d alone, expected %d" % (run.returncode, alone.returncode, status))
    if run.stdout != alone.stdout:
        fail("output differs: %r traced, %r alone" % (run.stdout, alone.stdout))
    stripped_msg = "is stripped and no debug file was found: only exported functions can be traced (none matches"
    if scenario == "nodebug":
        if run.stderr.count("xpti: functions:") != 1 or stripped_msg not in run.stderr:
            fail("expected one line saying the program is stripped")
    elif any("xpti: functions:" in l and not SKIPPED.search(l) for l in run.stderr.splitlines()) \
            and scenario != "minimum":
        if scenario not in SUBSET or any("xpti: functions:" in l and "cannot patch" not in l
                                         and not SKIPPED.search(l)
                                         for l in run.stderr.splitlines()):
            fail("unexpected message from the library")

    mins = scenario == "minimum"
    if scenario == "fork":  # a folder per process: their rows together
        stats = glob.glob(os.path.join(out, "*", "stats.csv"))
        if len(stats) != 2:
            fail("expected two process folders, found %r" % stats)
    else:
        stats = [os.path.join(process_dir(out), "stats.csv")]
    rows = []
    for path in stats:
        with open(path, newline="") as f:
            rows += [r for r in csv.DictReader(f) if r["stream"] == "xptrace.functions"]
    got, extra = {}, 0
    for r in rows:
        if r["name"].startswith(("_sub_I_", "_sub_D_")):
            extra += int(r["count"])
            continue  # module constructors the compiler adds (ASan's), not the fixture's
        got[r["name"]] = got.get(r["name"], 0) + int(r["count"])
        if int(r["unmatched_ends"] or 0) or int(r["unclosed_begins"] or 0):
            fail("%s: %s unmatched ends, %s unclosed begins (nesting broken)"
                 % (r["name"], r["unmatched_ends"], r["unclosed_begins"]))
    if scenario.startswith("jumps"):
        # The jumped calls end at the jump: shorter than the spin after it.
        spins = [int(v) for v in re.findall(r"spin_ns=(\d+)", run.stderr)]
        longest = max(int(r["max_ns"]) for r in rows if r["name"] in ("jdeep1", "jdeep2"))
        if len(spins) != 3 or longest >= min(spins):
            fail("a jumped call lasted %d ns, past the jump (spins %r)" % (longest, spins))
    if way == "cyg" and "via_ptr" in expect:
        expect = dict(expect, inlined_add=expect["via_ptr"])
    variable = {n: got.pop(n, 0) for n in VARIABLE.get(scenario, ())}
    if variable and (min(variable.values()) < 1 or len(set(variable.values())) != 1):
        fail("signal handler calls %s: expected the same count, at least 1" % variable)
    if scenario in SUBSET:
        if len(got) <= len(expect):  # the C library's at least, at the call sites
            fail("no library function traced: %s" % sorted(got))
        got = {n: k for n, k in got.items() if n in expect}
    if got != expect:
        fail("counts %s, expected %s" % (sorted(got.items()), sorted(expect.items())))
    if not expect:
        print("test_functions: OK")
        return
    if mins:
        for r in rows:
            if int(r["min_ns"]) < 1000000:
                fail("%s: a slice of %s ns under --min-duration 1ms" % (r["name"], r["min_ns"]))
        return
    def check_trace(trace):
        check = [sys.executable, checker, "proto", proto, trace, "--threads", str(threads)]
        if not variable and scenario not in SUBSET:  # else a count of its own in each run
            check += ["--slices", str(sum(expect.values()) + extra)]
        for name, n in expect.items():
            check += ["--name", "%s=%d" % (name, n)]
        r = subprocess.run(check, capture_output=True, text=True, timeout=60)
        print(r.stdout)
        if r.returncode != 0:
            fail("trace check of " + trace)
    check_trace(os.path.join(out, "trace.perfetto-trace"))
    # The trace collector alone: the direct path (its recorder called from
    # the hooks and trampolines, no dispatcher), the same trace.
    direct = os.path.join(scratch, "direct")
    cmd[cmd.index("perfetto,stats")] = "perfetto"
    cmd[cmd.index(out)] = direct
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    print(" ".join(cmd))
    print(run.stderr)
    if run.returncode != status or run.stdout != alone.stdout:
        fail("direct: status %d, output %r" % (run.returncode, run.stdout))
    if "dropped" in run.stderr:
        fail("direct: events dropped")
    check_trace(os.path.join(direct, "trace.perfetto-trace"))
    if scenario == "deep":
        deep_small(cmd, checker, proto, scratch, sum(expect.values()) + extra)
    print("test_functions: OK")


def deep_small(cmd, checker, proto, scratch, slices):
    """The deep scenario in 8 KiB chunks (a 1 MiB buffer): the ends of
    at most 127 open calls are held by function tracing's own appends, of
    128 more by the collector's nesting; past that the collector gives up
    the oldest open call's held room (it once dropped every deeper call).
    Every half of every slice is either in the trace or counted as
    dropped, and what is there is properly nested."""
    small = os.path.join(scratch, "small")
    cmd = list(cmd)
    cmd[cmd.index(os.path.join(scratch, "direct"))] = small
    cmd[cmd.index("--buffer-size") + 1] = "1M"
    cmd[cmd.index("--buffer-policy") + 1] = "flush"
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    print(" ".join(cmd))
    print(run.stderr)
    if run.returncode != 0:
        fail("small chunks: status %d" % run.returncode)
    check = [sys.executable, checker, "proto", proto, os.path.join(small, "trace.perfetto-trace"),
             "--threads", "1", "--total", str(2 * slices)]
    if "dropped" not in run.stderr:  # then every slice is there
        check += ["--slices", str(slices)]
    r = subprocess.run(check, capture_output=True, text=True, timeout=60)
    print(r.stdout)
    if r.returncode != 0:
        fail("trace check of the small chunks' trace")


main()
