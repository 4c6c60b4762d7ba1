#!/usr/bin/env python3
"""`xptrace causal` against tests/causal/causal_fixture.c (two threads A
and B per round, joined; A the longer), built with each kind of progress
point.  Checks the program's output and status are its own, profile.coz
is in Coz's format, the progress counts are the fixture's, and (scenario
"validate") that the prediction for the line that matters is large and
for the line that does not is small.

  test_causal.py SCENARIO XPTRACE FIXTURE_DIR SCRATCH SANITIZE"""
import glob
import os
import re
import shutil
import subprocess
import sys

SCENARIO, XPTRACE, BIN, SCRATCH = sys.argv[1:5]
SANITIZE = sys.argv[5] if len(sys.argv) > 5 else ""
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "causal_fixture.c")
ROUNDS = 100  # 0.7 s on a quiet machine: several 100 ms windows
if SANITIZE:  # the sanitized library goes into the sanitized fixtures
    os.environ["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "") +
                                  ":verify_asan_link_order=0").lstrip(":")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def line_of(tag, src=SRC):
    with open(src) as f:
        for n, text in enumerate(f, 1):
            if tag in text:
                return "%s:%d" % (os.path.basename(src), n)
    fail("no %s in %s" % (tag, src))


def fixture(name):
    return os.path.join(BIN, name)


def run(cmd, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                       timeout=280)
    return p.returncode, p.stdout, p.stderr


def causal(opts, cmd, out=None):
    out = out or os.path.join(SCRATCH, "out")
    shutil.rmtree(out, ignore_errors=True)
    rc, so, se = run([XPTRACE, "causal", "-o", out] + opts + ["--"] + cmd)
    return rc, so, se, out


def expect_own_output(so, rounds):
    first = so.splitlines()[0] if so else ""
    if first != "rounds %d" % rounds or "s per round" not in so:
        fail("program output changed: %r" % so)


NUM = re.compile(r"^\d+$")


def parse_coz(path):
    """Every line of profile.coz, checked against Coz's format."""
    recs = []
    with open(path) as f:
        for raw in f:
            parts = raw.rstrip("\n").split("\t")
            kind, fields = parts[0], {}
            for p in parts[1:]:
                if "=" not in p:
                    fail("field without '=' in %r" % raw)
                k, v = p.split("=", 1)
                fields[k] = v
            if kind == "experiment":
                for k in ("selected", "speedup", "duration", "selected-samples"):
                    if k not in fields:
                        fail("experiment without %s: %r" % (k, raw))
                sp = float(fields["speedup"])
                if not 0 <= sp <= 1 or abs(sp * 20 - round(sp * 20)) > 1e-6:
                    fail("speedup not in 0..1 by 0.05: %r" % raw)
                if not re.match(r"^.+:\d+$", fields["selected"]):
                    fail("selected is not file:line: %r" % raw)
                if not NUM.match(fields["duration"]) or not NUM.match(fields["selected-samples"]):
                    fail("duration/selected-samples not whole numbers: %r" % raw)
            elif kind == "throughput-point":
                if "name" not in fields or not NUM.match(fields.get("delta", "")):
                    fail("bad throughput-point: %r" % raw)
            elif kind == "latency-point":
                for k in ("arrivals", "departures"):
                    if not NUM.match(fields.get(k, "")):
                        fail("bad latency-point: %r" % raw)
                if not re.match(r"^-?\d+$", fields.get("difference", "")):
                    fail("bad latency-point difference: %r" % raw)
            elif kind in ("startup", "runtime"):
                if not NUM.match(fields.get("time", "")):
                    fail("bad %s: %r" % (kind, raw))
            elif kind in ("samples", "shutdown"):
                pass
            else:
                fail("a line Coz's viewer would refuse: %r" % raw)
            recs.append((kind, fields))
    return recs


def experiments(recs):
    """[(experiment fields, [point records])]"""
    out = []
    for kind, f in recs:
        if kind == "experiment":
            out.append((f, []))
        elif kind in ("throughput-point", "latency-point"):
            if not out:
                fail("a point line before any experiment")
            out[-1][1].append((kind, f))
    return out


def totals(recs):
    return {(f["point"], f.get("type")): int(f["count"]) for k, f in recs
            if k == "shutdown" and "point" in f}


def check_profile(out, point, rounds, kind="throughput-point", min_exps=2):
    recs = parse_coz(os.path.join(out, "profile.coz"))
    exps = experiments(recs)
    if len(exps) < min_exps:
        fail("%d experiments, expected >= %d" % (len(exps), min_exps))
    visits, seen = 0, False
    for e, pts in exps:
        if not pts and not seen:
            continue  # before the program's first visit: no point known yet
        seen = True
        if not e["selected"].split(":")[0].endswith("causal_fixture.c"):
            fail("experiment on a line out of the default scope: %s" % e["selected"])
        mine = [f for k, f in pts if k == kind and f["name"] == point]
        if len(mine) != 1:
            fail("experiment without exactly one %s '%s': %r" % (kind, point, pts))
        visits += int(mine[0]["delta" if kind == "throughput-point" else "arrivals"])
    tot = totals(recs)
    want = "throughput" if kind == "throughput-point" else "begin"
    if tot.get((point, want)) != rounds:
        fail("whole-run count of '%s' is %r, the fixture made %d" % (point, tot, rounds))
    if not 0 < visits <= rounds:
        fail("visits during experiments %d not in 1..%d" % (visits, rounds))
    if not os.path.exists(os.path.join(out, "causal.txt")):
        fail("no causal.txt")
    return recs, exps


def scenario_usage():
    bad = [[], ["--speedup", "7", "--", "true"], ["--speedup", "x", "--", "true"],
           ["--line", "nocolon", "--", "true"], ["--progress", "nocolon", "--", "true"],
           ["--variants", "0", "--", "true"], ["--window", "1", "--", "true"],
           ["--progress-function", "a b", "--", "true"], ["--bogus", "--", "true"]]
    for opts in bad:
        rc, so, se = run([XPTRACE, "causal"] + opts)
        first = se.splitlines()[0] if se else ""
        if rc != 2 or not first.startswith("xptrace: ") or so:
            fail("%r: status %d, first line %r, stdout %r" % (opts, rc, first, so))
    rc, so, se = run([XPTRACE, "causal", "--help"])
    if rc != 0 or "usage: xptrace causal" not in so or "%%" in so:
        fail("--help: %d %r" % (rc, so))
    rc, so, se = run([XPTRACE, "causal", "--", "/nonexistent/prog"])
    if rc != 127:
        fail("missing command: status %d" % rc)
    bad_profile = os.path.join(SCRATCH, "bad.coz")
    os.makedirs(SCRATCH, exist_ok=True)
    with open(bad_profile, "w") as f:
        f.write("startup\ttime=1\n")
    rc, so, se = run([XPTRACE, "causal", "--report", bad_profile])
    if rc != 1 or len(se.splitlines()) != 1 or not se.startswith("xptrace: "):
        fail("--report on a profile without experiments: %d %r" % (rc, se))


def scenario_progress():
    rc, so, se, out = causal(["--window", "100"], [fixture("causal_fixture"), str(ROUNDS)])
    if rc != 0:
        fail("status %d: %s" % (rc, se))
    expect_own_output(so, ROUNDS)
    check_profile(out, "round", ROUNDS)
    if "progress point 'round'" not in se:
        fail("no ranking on stderr: %s" % se)


def scenario_sampler():
    """Both ways of sampling: perf task-clock events (the default) and the
    CPU-time timers (XPTRACE_CAUSAL_SAMPLER=timer, the fallback where perf
    events are refused) give a whole profile; and the perf fds stay out of
    the numbers the program's own open() gets (they live high in the
    table, one per sampled thread), and out of a child forked while
    another thread runs."""
    rc, so, se = run([fixture("causal_fixture"), str(ROUNDS), "fds"])
    alone = [l for l in so.splitlines() if "fd" in l]
    if rc != 0 or len(alone) != 2 or not alone[0].startswith("first free fd"):
        fail("the fixture alone: %d %r" % (rc, so))
    for sampler in ("perf", "timer"):
        os.environ["XPTRACE_CAUSAL_SAMPLER"] = sampler
        try:
            rc, so, se, out = causal(["--window", "100"],
                                     [fixture("causal_fixture"), str(ROUNDS), "fds"],
                                     out=os.path.join(SCRATCH, sampler))
        finally:
            del os.environ["XPTRACE_CAUSAL_SAMPLER"]
        if rc != 0:
            fail("%s: status %d: %s" % (sampler, rc, se))
        saw = [l for l in so.splitlines() if "fd" in l]
        if saw != alone:
            fail("%s: the program saw %r, alone %r" % (sampler, saw, alone))
        _, exps = check_profile(out, "round", ROUNDS)
        if not exps:
            fail("%s: no experiment" % sampler)
        if "perf events refused" in se:
            print("note: perf events refused here; both runs used the timer")


def scenario_coz():
    rc, so, se, out = causal(["--window", "100"], [fixture("causal_fixture"), str(ROUNDS), "coz"])
    if rc != 0:
        fail("status %d: %s" % (rc, se))
    expect_own_output(so, ROUNDS)
    check_profile(out, "round", ROUNDS)


def scenario_latency():
    rc, so, se, out = causal(["--window", "100"],
                             [fixture("causal_fixture"), str(ROUNDS), "latency"])
    if rc != 0:
        fail("status %d: %s" % (rc, se))
    expect_own_output(so, ROUNDS)
    recs, _ = check_profile(out, "round", ROUNDS, kind="latency-point")
    if totals(recs).get(("round", "end")) != ROUNDS:
        fail("ends counted: %r" % totals(recs))


def scenario_status():
    # 7 rounds: the fixture exits with 3; too short for an experiment.
    rc, so, se, out = causal([], [fixture("causal_fixture"), "7"])
    if rc != 3:
        fail("status %d, the program's is 3" % rc)
    expect_own_output(so, 7)
    recs = parse_coz(os.path.join(out, "profile.coz"))
    if totals(recs).get(("round", "throughput")) != 7:
        fail("count %r" % totals(recs))
    # The same -o again: the new profile holds this run only.
    rc, so, se = run([XPTRACE, "causal", "-o", out, "--", fixture("causal_fixture"), "7"])
    recs = parse_coz(os.path.join(out, "profile-1.coz"))
    if rc != 3 or sum(1 for k, _ in recs if k == "startup") != 1:
        fail("second run into the same folder: %d, %r" % (rc, recs))


def scenario_xpti():
    rc, so, se, out = causal(["--window", "100", "--progress", "causal.fixture:task_end"],
                             [fixture("causal_fixture_xpti"), str(ROUNDS)])
    if rc != 0:
        fail("status %d: %s" % (rc, se))
    expect_own_output(so, ROUNDS)
    check_profile(out, "causal.fixture:task_end", ROUNDS)


def scenario_function():
    rc, so, se, out = causal(["--window", "100", "--progress-function", "round_done"],
                             [fixture("causal_fixture_plain"), str(ROUNDS)])
    if rc != 0:
        fail("status %d: %s" % (rc, se))
    expect_own_output(so, ROUNDS)
    check_profile(out, "xptrace.functions:function_begin:round_done", ROUNDS)


def scenario_report():
    rc, so, se, out = causal(["--window", "100", "--line", line_of("LINE_A"), "--speedup", "50"],
                             [fixture("causal_fixture"), str(ROUNDS)])
    if rc != 0:
        fail("status %d: %s" % (rc, se))
    rc, so2, se2 = run([XPTRACE, "causal", "--report", os.path.join(out, "profile.coz")])
    if rc != 0 or "progress point 'round'" not in so2 or line_of("LINE_A") not in so2:
        fail("--report: %d %r %r" % (rc, so2, se2))
    with open(os.path.join(out, "causal.csv")) as f:
        head = f.readline().strip()
        rows = [l for l in f if l.strip()]
    if head != "point,line,speedup,experiments,predicted,ci95" or not rows:
        fail("causal.csv: %r %r" % (head, rows))
    if not all(',50,' in r and line_of("LINE_A") in r for r in rows):
        fail("causal.csv rows not all line A at 50 %%: %r" % rows)


def scenario_variants():
    la = line_of("LINE_A")
    rc, so, se, out = causal(["--window", "100", "--line", la, "--speedup", "50", "--speedup",
                              "25", "--variants", "1"], [fixture("causal_fixture"), "40"])
    if rc != 0:
        fail("status %d: %s" % (rc, se))
    parts = glob.glob(os.path.join(out, "causal-*.coz"))
    if len(parts) != 2 or "variant 1/2" not in se or "variant 2/2" not in se:
        fail("two variants expected: %r %s" % (parts, se))
    exps = experiments(parse_coz(os.path.join(out, "profile.coz")))
    speeds = {e["speedup"] for e, _ in exps}
    sel = {e["selected"] for e, _ in exps}
    if not speeds <= {"0.00", "0.25", "0.50"} or "0.50" not in speeds or "0.25" not in speeds:
        fail("speedups %r" % speeds)
    if len(sel) != 1 or not sel.pop().endswith(la):
        fail("selected lines: %r" % sel)


def scenario_scope():
    rc, so, se, out = causal(["--source-scope", "no_such_file.c"],
                             [fixture("causal_fixture"), "20"])
    if rc != 0:
        fail("status %d" % rc)
    expect_own_output(so, 20)
    if "no source line in scope" not in se:
        fail("no message about the empty scope: %s" % se)
    if experiments(parse_coz(os.path.join(out, "profile.coz"))):
        fail("experiments although nothing is in scope")
    # A glob on the base name selects the fixture's lines again.
    # ... and --experiments 3 stops after 3 (the run lasts 6 windows or more).
    rc, so, se, out = causal(["--window", "100", "--source-scope", "causal_fix*.c",
                              "--experiments", "3"], [fixture("causal_fixture"), str(ROUNDS)])
    if rc != 0:
        fail("status %d: %s" % (rc, se))
    _, exps = check_profile(out, "round", ROUNDS)
    if len(exps) != 3:
        fail("--experiments 3 ran %d" % len(exps))


def predicted(out, line, speedup="0.50", point="round"):
    """Predicted program speedup, in %: 1 - period(speedup) / period(0),
    period = duration / visits, pooled within blocks of 8 consecutive
    windows (the baseline alternates with the speedup, so a block sees one
    load), the median over blocks: a load spike of the machine moves one
    block, not the answer.  (23 windows once, under load: blocks of 6.)"""
    wins = [(e["speedup"], int(e["duration"]),
             sum(int(f["delta"]) for k, f in pts if k == "throughput-point" and
                 f["name"] == point))
            for e, pts in experiments(parse_coz(os.path.join(out, "profile.coz")))
            if e["selected"].endswith(line)]
    # Blocks of 8, or of fewer (even: a baseline and a speedup each) when
    # windows disturbed by load were discarded: 3 blocks at least.
    size = 8 if len(wins) >= 24 else max(4, len(wins) // 3 // 2 * 2)
    preds = []
    for i in range(0, len(wins) - size + 1, size):
        acc = {}
        for sp, d, v in wins[i:i + size]:
            a = acc.setdefault(sp, [0, 0])
            a[0] += d
            a[1] += v
        if acc.get("0.00", [0, 0])[1] and acc.get(speedup, [0, 0])[1]:
            preds.append(100 * (1 - (acc[speedup][0] / acc[speedup][1]) /
                                (acc["0.00"][0] / acc["0.00"][1])))
    if len(preds) < 3:
        fail("not enough experiments: %d windows" % len(wins))
    preds.sort()
    mid = len(preds) // 2
    med = preds[mid] if len(preds) % 2 else (preds[mid - 1] + preds[mid]) / 2
    return med, ["%+.0f" % p for p in preds]


def real_period(name, rounds):
    rc, so, se = run([fixture(name), str(rounds)])
    m = re.search(r"([0-9.]+) s per round", so)
    if rc or not m:
        fail("%s: %d %r" % (name, rc, so))
    return float(m.group(1))


def scenario_validate():
    if SANITIZE:
        print("SKIP: statistical test; the sanitizers' cost changes the timing it measures")
        sys.exit(77)
    base = real_period("causal_fixture", 80)
    real_a = 100 * (1 - real_period("causal_fixture_a50", 80) / base)
    real_b = 100 * (1 - real_period("causal_fixture_b50", 80) / base)
    preds = {}
    rounds = "8s"  # 40 windows of 200 ms: 5 blocks
    for tag in ("LINE_A", "LINE_B"):
        line = line_of(tag)
        rc, so, se, out = causal(["--window", "200", "--line", line, "--speedup", "50"],
                                 [fixture("causal_fixture"), rounds],
                                 out=os.path.join(SCRATCH, tag))
        if rc != 0:
            fail("status %d: %s" % (rc, se))
        preds[tag], acc = predicted(out, line)
        print("%s at 50 %%: predicted %+.1f %% (%r)" % (tag, preds[tag], acc))
    print("real: line A 50 %% less work %+.1f %%, line B %+.1f %%" % (real_a, real_b))
    # Wide bounds, for a loaded 2-vCPU machine (bench/causal/ measures):
    # A (about +45 predicted) is the critical path, B is off it by
    # construction; with more runnable threads than CPUs B's work does take
    # CPU from A (really shortening B then helps), so B gets room.
    if preds["LINE_A"] < 15:
        fail("line A (the critical path) predicts only %+.1f %%" % preds["LINE_A"])
    if preds["LINE_B"] > 12:
        fail("line B (off the critical path) predicts %+.1f %%" % preds["LINE_B"])
    if preds["LINE_A"] - preds["LINE_B"] < 15:
        fail("lines A and B not told apart: %+.1f vs %+.1f" % (preds["LINE_A"], preds["LINE_B"]))
    if real_a < 20 or abs(real_b) > 10:
        print("note: the real speedups (%+.1f, %+.1f) are off the construction; loaded machine"
              % (real_a, real_b))


def scenario_pipeline():
    """Two stages through a bounded queue (mutex, condition variables):
    the consumer's line is the slow stage, the producer's waits on a full
    queue.  Exercises the wrapped waits: a woken thread is excused."""
    if SANITIZE:
        print("SKIP: statistical test; the sanitizers' cost changes the timing it measures")
        sys.exit(77)
    src = os.path.join(os.path.dirname(SRC), "causal_pipeline.c")
    # "queue": mutex and condition variables; "pipe": the stages wait in
    # read() and write() on a pipe of one page (causal_io.c's wrappers).
    for mode in ("queue", "pipe"):
        preds = {}
        for tag in ("LINE_C", "LINE_P"):
            line = line_of(tag, src)
            rc, so, se, out = causal(["--window", "200", "--line", line, "--speedup", "50"],
                                     [fixture("causal_pipeline"), "6", mode],
                                     out=os.path.join(SCRATCH, tag + mode))
            if rc != 0 or not so.startswith("items "):
                fail("status %d, output %r: %s" % (rc, so, se))
            preds[tag], blocks = predicted(out, line, point="item")
            print("%s, %s at 50 %%: predicted %+.1f %% (%r)" % (mode, tag, preds[tag], blocks))
        if preds["LINE_C"] < 20:
            fail("%s: the slow stage's line predicts only %+.1f %%" % (mode, preds["LINE_C"]))
        # Truth 0; issue 27's bound on a loaded machine is 15 points (one
        # 200 ms-window experiment read +17.4 and +12.0 at load ~18), and the
        # ranking must hold: the waiting stage well below the slow one.
        if preds["LINE_P"] > 15 or preds["LINE_P"] > preds["LINE_C"] - 10:
            fail("%s: the waiting stage's line predicts %+.1f %% (the slow stage %+.1f %%)"
                 % (mode, preds["LINE_P"], preds["LINE_C"]))
        if preds["LINE_C"] - preds["LINE_P"] < 20:
            fail("%s: stages not told apart: %+.1f vs %+.1f"
                 % (mode, preds["LINE_C"], preds["LINE_P"]))


def scenario_barrier():
    """Two threads meet at a barrier every round (tests/causal/causal_barrier.c):
    A's line does 2 units, B's 1.  On a quiet machine: A's line 50 % faster
    makes the program ~50 % faster, 100 % faster still ~50 % (B's line then
    decides), B's line never helps.  On a busy one the two threads compete
    for CPUs and B's line does help; the truth is the same program really
    edited (builds a50, a0, b0), timed around each prediction.  A model that
    charged a waiting thread the delays of its wait, or counted its wait
    for a CPU after a wake-up as line time, gave A@100 ~ +85-89 %."""
    if SANITIZE:
        print("SKIP: statistical test; the sanitizers' cost changes the timing it measures")
        sys.exit(77)
    src = os.path.join(os.path.dirname(SRC), "causal_barrier.c")

    def real(build):
        rc, so, se = run([fixture(build), "1"])
        m = re.search(r"([0-9.]+) s per round", so)
        if rc or not m:
            fail("%s: %d %r" % (build, rc, so))
        return float(m.group(1))

    # ideal: the answer on an idle machine, by construction of the fixture.
    for tag, sp, build, ideal in (("LINE_A", "50", "causal_barrier_a50", 50),
                                  ("LINE_A", "100", "causal_barrier_a0", 50),
                                  ("LINE_B", "100", "causal_barrier_b0", 0)):
        line = line_of(tag, src)
        before = (real("causal_barrier"), real(build))
        rc, so, se, out = causal(["--window", "200", "--line", line, "--speedup", sp],
                                 [fixture("causal_barrier"), "7"],
                                 out=os.path.join(SCRATCH, tag + sp))
        if rc != 0 or not so.startswith("rounds "):
            fail("status %d, output %r: %s" % (rc, so, se))
        after = (real(build), real("causal_barrier"))
        truth = 100 * (1 - (before[1] + after[0]) / (before[0] + after[1]))
        pred, blocks = predicted(out, line, speedup="%.2f" % (int(sp) / 100))
        print("%s at %s %%: predicted %+.1f %% (%r), real %+.1f %%, idle machine %+d %%"
              % (tag, sp, pred, blocks, truth, ideal))
        # Over-predicting is the failure that misleads (the old +89 % for
        # +50 %, and +32 % for B's line that never helps): at most 25
        # points above the truth.  A virtual speedup predicts the program
        # on a machine with CPUs to spare; on a busy one the edited program
        # also gains the CPU its line no longer takes from the other thread
        # (B's line removed gave +45 % at load 5 on 2 cores), which no
        # virtual speedup sees.  So the bounds span the idle machine's
        # answer and the one measured now: 30 below the lower, 25 above
        # the higher (the model's own error on an idle machine: up to
        # -15 / +19 with CPU-time timers, docs/causal.md).
        lo, hi = min(truth, ideal) - 30, max(truth, ideal) + 25
        if not lo <= pred <= hi:
            fail("%s at %s %% predicts %+.1f %%, the edited program is %+.1f %% faster "
                 "(%+d %% on an idle machine)" % (tag, sp, pred, truth, ideal))


def relay(mode):
    """The relay (tests/causal/causal_relay.c): A's line (3 units) and B's
    (1) take turns through `mode` (a raw futex, or pipes waited on in
    ppoll); C spins off the relay.  Idle machine: A at 100 % gives +75 %,
    C at 50 % 0.  A thread woken by the other must be excused the delays
    added while it waited: without the futex and ppoll wrappers (load 3-5
    on 2 CPUs) A predicted -1.9 and -0.4 % where the edited program was
    +78 and +74 % faster.  The
    truth is the program really edited (builds a0, c50), timed around each
    prediction, as in scenario_barrier."""
    if SANITIZE:
        print("SKIP: statistical test; the sanitizers' cost changes the timing it measures")
        sys.exit(77)
    src = os.path.join(os.path.dirname(SRC), "causal_relay.c")

    def real(build):
        rc, so, se = run([fixture(build), "1", mode])
        m = re.search(r"([0-9.]+) s per round", so)
        if rc or not m:
            fail("%s %s: %d %r" % (build, mode, rc, so))
        return float(m.group(1))

    # C at 50 %: C runs all the time, so at 100 % its delays would be the
    # whole window and leave nothing to measure.
    for tag, sp, build, ideal in (("LINE_A", "100", "causal_relay_a0", 75),
                                  ("LINE_C", "50", "causal_relay_c50", 0)):
        line = line_of(tag, src)
        before = (real("causal_relay"), real(build))
        rc, so, se, out = causal(["--window", "200", "--line", line, "--speedup", sp],
                                 [fixture("causal_relay"), "7", mode],
                                 out=os.path.join(SCRATCH, tag))
        if rc != 0 or not so.startswith("rounds "):
            fail("status %d, output %r: %s" % (rc, so, se))
        after = (real(build), real("causal_relay"))
        truth = 100 * (1 - (before[1] + after[0]) / (before[0] + after[1]))
        pred, blocks = predicted(out, line, speedup="%.2f" % (int(sp) / 100))
        print("%s: %s at %s %%: predicted %+.1f %% (%r), real %+.1f %%, idle machine %+d %%"
              % (mode, tag, sp, pred, blocks, truth, ideal))
        # As the barrier pair's bounds (a busy machine's truth is another
        # program): between the idle machine's answer and the one measured
        # now, 30 points below the lower for A, 20 for the off-relay C,
        # 20 above the higher.  Charged for its waits, A gave ~0 (its
        # bound is +45 or more).
        # When the run itself said its threads waited for a CPU a quarter
        # of their time or more, 30 above: docs/causal.md's measured limit
        # there (the off-relay C read +23 % against -1 % at 2 busy
        # processes per core: a delay's sleep gives its CPU away).
        busy = re.search(r"waited for a CPU (\d+) %", se)
        lo = min(truth, ideal) - (30 if ideal else 20)
        hi = max(truth, ideal) + (30 if busy else 20)
        if busy:
            print("busy machine: %s %% of runnable time waiting for a CPU" % busy.group(1))
        if not lo <= pred <= hi:
            fail("%s: %s at %s %% predicts %+.1f %%, the edited program is %+.1f %% faster "
                 "(%+d %% on an idle machine)" % (mode, tag, sp, pred, truth, ideal))


def scenario_busy():
    """Two busy processes per CPU beside the program: its threads wait for
    a CPU about 2/3 of their runnable time, and the exit line says so (a
    delay there changes how the scheduler shares the CPUs; bench/causal
    measured errors up to 30 points)."""
    if not os.path.exists("/proc/thread-self/schedstat"):
        print("SKIP: no /proc/thread-self/schedstat (kernel without schedstats)")
        sys.exit(77)
    cpus = len(os.sched_getaffinity(0))
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2 * cpus)]
    try:
        rc, so, se, out = causal(["--window", "100"], [fixture("causal_fixture"), str(ROUNDS)])
    finally:
        for p in busy:
            p.kill()
            p.wait()
    if rc != 0:
        fail("status %d: %s" % (rc, se))
    expect_own_output(so, ROUNDS)
    m = re.search(r"threads waited for a CPU (\d+) % of their runnable time", se)
    # 2 threads of the fixture and 2n busy loops on n CPUs: ~1 - n/(2n+2).
    if not m or int(m.group(1)) < 25:
        fail("no busy-machine line (or under 25 %%) with %d busy loops on %d CPUs: %s"
             % (2 * cpus, cpus, se))
    print("busy: %s %% waited" % m.group(1))


def scenario_futex():
    relay("futex")


def scenario_ppoll():
    relay("ppoll")


if __name__ == "__main__":
    os.makedirs(SCRATCH, exist_ok=True)
    globals()["scenario_" + SCENARIO]()
    print("ok")
