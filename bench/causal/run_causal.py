#!/usr/bin/env python3
"""Causal profiling against real speedups, next to Coz (issue 27).

Five fixtures of known answer, each line built really faster (a
compile-time work factor: 75/50/0 % of its work for a speedup of
25/50/100 %):
  barrier   tests/causal/causal_barrier.c  A (2 units) and B (1) meet at a
            barrier each round: A decides until 2x faster, B never;
  pipeline  tests/causal/causal_pipeline.c the slow stage C and the stage P
            that waits on a bounded queue (condition variables);
  lock      bench/causal/causal_lock.c     two threads, line L inside one
            busy mutex, line W outside it;
  offpath   bench/causal/causal_offpath.c  the main thread's line C makes
            progress, a background thread's hotter line H is waited for by
            nobody;
  ab        tests/causal/causal_fixture.c  fork-join rounds, A the longer
            (also with XPTRACE_CAUSAL_CPU_ONLY=1, Coz's span);
  relay-futex, relay-ppoll  tests/causal/causal_relay.c  A (3 units) and
            B (1) take turns through a raw futex / pipes in ppoll, C spins
            off the relay (not in the default list).
real      = median of REPS paired runs (base build, edited build);
xptrace   = `xptrace causal --line L --speedup s` on the base build (the
            baseline alternates with s in the same process);
coz       = Coz 0.2.2 (`coz run --fixed-line L --fixed-speedup s`, and a run
            at 0 for its baseline), built with -gdwarf-3 -gstrict-dwarf, if
            `coz` is installed (Debian's coz-profiler).
Predictions: 1 - period(s) / period(0), period = sum(duration) /
sum(visits), pooled within blocks of windows, median over blocks.

  bench/causal/run_causal.py [BUILD_DIR]
  env: REPS=5, SECONDS=8, NOCOZ=1,
       FIXTURES=barrier,pipeline,lock,offpath,ab (also relay-futex, relay-ppoll)"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
XPTRACE = os.path.join(BUILD, "bin", "xptrace")
SRC = os.path.join(ROOT, "tests", "causal", "causal_fixture.c")
REPS = int(os.environ.get("REPS", "5"))
SECONDS = float(os.environ.get("SECONDS", "8"))
TMP = tempfile.mkdtemp(prefix="causal-bench-")


def line_of(tag, src=SRC):
    with open(src) as f:
        for n, text in enumerate(f, 1):
            if tag in text:
                return n
    raise SystemExit("no %s in %s" % (tag, src))


def build(name, defs, flags=("-g",), src=SRC):
    exe = os.path.join(TMP, name)
    subprocess.run(["gcc", "-O2", *flags, "-I" + os.path.join(ROOT, "include"), src, "-o", exe,
                    "-pthread"] + ["-D" + d for d in defs], check=True)
    return exe


def period(exe, rounds, extra=()):
    out = subprocess.run([exe, str(rounds), *extra], stdout=subprocess.PIPE, text=True, check=True).stdout
    return float(re.search(r"([0-9.]+) s per (\w+)", out).group(1))


def windows(profile, line_suffix):
    """[(process index, speedup %, duration, visits)] in file order."""
    out, proc, exp = [], -1, None
    with open(profile) as f:
        for raw in f:
            parts = raw.rstrip("\n").split("\t")
            fields = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
            if parts[0] == "startup":
                proc += 1
            elif parts[0] == "experiment":
                exp = None
                if fields["selected"].endswith(line_suffix):
                    exp = [proc, round(float(fields["speedup"]) * 100), int(fields["duration"]), 0]
                    out.append(exp)
            elif parts[0] in ("throughput-point", "progress-point") and exp:
                exp[3] += int(fields["delta"])
    return out


def predict(wins, s, block=8):
    """1 - period(s) / period(0), pooled within blocks of `block`
    consecutive windows of one process (the baseline alternates with s, so
    a block sees one load; Coz's fixed runs: one process per speedup, so the
    block pairs its windows with the baseline process's same-numbered ones),
    median over blocks, and the pooled value over everything (Coz's
    viewer's way)."""
    preds = []
    groups = {}
    for w in wins:
        groups.setdefault(w[0], []).append(w)
    procs = list(groups.values())
    if all(len({w[1] for w in g}) == 1 for g in procs):  # one speedup per process
        base = [g for g in procs if g[0][1] == 0]
        mine = [g for g in procs if g[0][1] == s]
        if not base or not mine:
            return float("nan"), float("nan")
        pairs = list(zip(base[0], mine[0]))
        procs = [[w for pair in pairs for w in pair]]
    for g in procs:
        for i in range(0, len(g) - block + 1, block):
            acc = {}
            for _, sp, d, v in g[i:i + block]:
                a = acc.setdefault(sp, [0, 0])
                a[0] += d
                a[1] += v
            if acc.get(0, [0, 0])[1] and acc.get(s, [0, 0])[1]:
                preds.append(100 * (1 - (acc[s][0] / acc[s][1]) / (acc[0][0] / acc[0][1])))
    tot = {}
    for _, sp, d, v in wins:
        a = tot.setdefault(sp, [0, 0])
        a[0] += d
        a[1] += v
    pooled = float("nan")
    if tot.get(0, [0, 0])[1] and tot.get(s, [0, 0])[1]:
        pooled = 100 * (1 - (tot[s][0] / tot[s][1]) / (tot[0][0] / tot[0][1]))
    return (statistics.median(preds) if preds else float("nan")), pooled


def xptrace_predictions(exe, line, rounds, cpu_only):
    out = os.path.join(TMP, "xp-%d-%d" % (line, cpu_only))
    env = dict(os.environ)
    if cpu_only:
        env["XPTRACE_CAUSAL_CPU_ONLY"] = "1"
    subprocess.run([XPTRACE, "causal", "-o", out, "--window", "200", "--line",
                    "causal_fixture.c:%d" % line, "--speedup", "25", "--speedup", "50", "--",
                    exe, str(rounds)], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    wins = windows(os.path.join(out, "profile.coz"), "causal_fixture.c:%d" % line)
    return {s: predict(wins, s) for s in (25, 50)}, len(wins)


def coz_predictions(exe, line, rounds):
    wins = []
    for k, s in enumerate((0, 25, 50)):
        out = os.path.join(TMP, "coz-%d-%d.coz" % (line, s))
        subprocess.run(["coz", "run", "--fixed-line", "causal_fixture.c:%d" % line,
                        "--fixed-speedup", str(s), "-o", out, "---", exe, str(rounds), "coz"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if os.path.exists(out):
            wins += [[k] + w[1:] for w in windows(out, "causal_fixture.c:%d" % line)]
    return {s: predict(wins, s, block=4) for s in (25, 50)}, len(wins)


# Time-bounded fixtures (argument: seconds): name -> (source, point,
# [(tag, macro, role)], [more arguments]).  Each line is built really
# faster: MACRO_PCT = 75/50/0 for a speedup of 25/50/100 %.
FIXTURES_TIMED = {
    "barrier": ("tests/causal/causal_barrier.c", "round",
                [("LINE_A", "A_PCT", "critical until 2x"), ("LINE_B", "B_PCT", "waits")]),
    "pipeline": ("tests/causal/causal_pipeline.c", "item",
                 [("LINE_C", "C_PCT", "slow stage"), ("LINE_P", "P_PCT", "waits on queue")]),
    "lock": ("bench/causal/causal_lock.c", "op",
             [("LINE_L", "L_PCT", "inside the lock"), ("LINE_W", "W_PCT", "outside it")]),
    "offpath": ("bench/causal/causal_offpath.c", "round",
                [("LINE_C", "C_PCT", "critical"), ("LINE_H", "H_PCT", "hottest, off path")]),
    # A and B take turns (a raw futex, or pipes waited on in ppoll), C
    # spins off the relay; C at 100 % fills its windows with delays (none
    # measured).
    "relay-futex": ("tests/causal/causal_relay.c", "round",
                    [("LINE_A", "A_PCT", "3 of 4 units"), ("LINE_C", "C_PCT", "off the relay")],
                    ["futex"]),
    "relay-ppoll": ("tests/causal/causal_relay.c", "round",
                    [("LINE_A", "A_PCT", "3 of 4 units"), ("LINE_C", "C_PCT", "off the relay")],
                    ["ppoll"]),
}
SPEEDUPS = (25, 50, 100)


def timed_windows(out, suffix, point):
    wins, exp = [], None
    with open(os.path.join(out, "profile.coz")) as f:
        for raw in f:
            parts = raw.rstrip("\n").split("\t")
            fields = dict(q.split("=", 1) for q in parts[1:] if "=" in q)
            if parts[0] == "experiment":
                exp = None
                if fields["selected"].endswith(suffix):
                    exp = [0, round(float(fields["speedup"]) * 100), int(fields["duration"]), 0]
                    wins.append(exp)
            elif parts[0] == "throughput-point" and exp and fields.get("name") == point:
                exp[3] += int(fields["delta"])
    return wins


def timed_fixture(name):
    """Real speedups (edited builds, paired with the base build), xptrace's
    and Coz's predictions, for each line of one time-bounded fixture."""
    src_rel, point, lines = FIXTURES_TIMED[name][:3]
    extra = FIXTURES_TIMED[name][3] if len(FIXTURES_TIMED[name]) > 3 else []
    src = os.path.join(ROOT, src_rel)
    base = build(name + "-base", [], src=src)
    rows = []
    have_coz = shutil.which("coz") and not os.environ.get("NOCOZ")
    coz_exe = build(name + "-coz", [], ("-gdwarf-3", "-gstrict-dwarf"), src=src) if have_coz else None
    for tag, macro, role in lines:
        ln = line_of(tag, src)
        suffix = "%s:%d" % (os.path.basename(src), ln)
        edits = {s: build("%s-%s%d" % (name, macro, 100 - s), ["%s=%d" % (macro, 100 - s)],
                          src=src) for s in SPEEDUPS}
        real = {}
        for s in SPEEDUPS:
            pairs = [(period(base, 1.0, extra), period(edits[s], 1.0, extra))
                     for _ in range(REPS)]
            real[s] = statistics.median(100 * (1 - e / b) for b, e in pairs)
        xp = {}
        for s in SPEEDUPS:
            out = os.path.join(TMP, "xp-%s-%s-%d" % (name, tag, s))
            subprocess.run([XPTRACE, "causal", "-o", out, "--window", "200", "--line", suffix,
                            "--speedup", str(s), "--", base, str(SECONDS), *extra],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            xp[s] = predict(timed_windows(out, suffix, point), s)[0]
        cz = {}
        if coz_exe:
            wins = []
            for k, s in enumerate((0,) + SPEEDUPS):
                out = os.path.join(TMP, "coz-%s-%s-%d.coz" % (name, tag, s))
                subprocess.run(["coz", "run", "--fixed-line", suffix, "--fixed-speedup", str(s),
                                "-o", out, "---", coz_exe, str(SECONDS / 2), *extra],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
                if os.path.exists(out):
                    wins += [[k] + w[1:] for w in windows(out, suffix)]
            cz = {s: predict(wins, s, block=4)[0] for s in SPEEDUPS}
        for s in SPEEDUPS:
            rows.append((name, "%s (%s)" % (tag[-1], role), s, real[s], xp[s], cz.get(s)))
    return rows


def timed_table(names):
    print("| fixture | line | speedup | real | xptrace | Coz |")
    print("|---|---|---|---|---|---|")
    for name in names:
        for fx, line, s, r, x, c in timed_fixture(name):
            print("| %s | %s | %d %% | %+.1f | %+.1f | %s |" % (
                fx, line, s, r, x, "" if c is None else "%+.1f" % c), flush=True)


def main():
    if not os.access(XPTRACE, os.X_OK):
        raise SystemExit("build first: no %s" % XPTRACE)
    chosen = os.environ.get("FIXTURES", "barrier,pipeline,lock,offpath,ab").split(",")
    timed = [f for f in chosen if f in FIXTURES_TIMED]
    if timed:
        print("program speedup in %%: real = median of %d paired runs of the edited build; "
              "predicted = median over blocks of 8 windows (Coz: 4)" % REPS)
        timed_table(timed)
    if "ab" not in chosen:
        return
    la, lb = line_of("LINE_A"), line_of("LINE_B")
    exes = {"base": build("base", []), "a75": build("a75", ["A_PCT=75"]),
            "a50": build("a50", ["A_PCT=50"]), "b75": build("b75", ["B_PCT=75"]),
            "b50": build("b50", ["B_PCT=50"])}
    p0 = period(exes["base"], 20)
    rounds = max(50, int(1.5 / p0))
    times = {k: [] for k in exes}
    for _ in range(REPS):  # interleaved: the machine's load drifts
        for k, exe in exes.items():
            times[k].append(period(exe, rounds))
    med = {k: statistics.median(v) for k, v in times.items()}
    real, spread = {}, {}
    for key, b in ((("A", 25), "a75"), (("A", 50), "a50"), (("B", 25), "b75"),
                   (("B", 50), "b50")):
        real[key] = 100 * (1 - med[b] / med["base"])
        paired = [100 * (1 - x / y) for x, y in zip(times[b], times["base"])]
        spread[key] = (min(paired), max(paired))
    print("base build: %.2f ms per round (median of %d runs of %d rounds)"
          % (1e3 * med["base"], REPS, rounds))
    long_rounds = max(100, int(2 * SECONDS / med["base"]))  # two variants of SECONDS each
    pred = {}
    for name, line in (("A", la), ("B", lb)):
        for cpu_only in (0, 1):
            p, acc = xptrace_predictions(exes["base"], line, long_rounds, cpu_only)
            tag = "xptrace-cpu" if cpu_only else "xptrace"
            for s in (25, 50):
                pred[(tag, name, s)] = p[s]
            print("%s line %s: %d windows" % (tag, name, acc), file=sys.stderr)
    have_coz = shutil.which("coz") and not os.environ.get("NOCOZ")
    if have_coz:
        coz_exe = build("coz", [], ("-gdwarf-3", "-gstrict-dwarf"))
        for name, line in (("A", la), ("B", lb)):
            p, acc = coz_predictions(coz_exe, line, max(50, int(SECONDS / med["base"])))
            for s in (25, 50):
                pred[("coz", name, s)] = p[s]
            print("coz line %s: %d windows" % (name, acc), file=sys.stderr)
    tools = ["xptrace", "xptrace-cpu"] + (["coz"] if have_coz else [])
    print("program speedup in %: real = median of the paired runs [their range];")
    print("predicted = median over blocks of windows (all windows pooled, as Coz's viewer)")
    print("| line | speedup | real | " + " | ".join(tools) + " |")
    print("|---|---|---|" + "---|" * len(tools))
    for name in ("A", "B"):
        for s in (25, 50):
            cells = ["%+.1f (%+.1f)" % pred[(t, name, s)] for t in tools]
            lo, hi = spread[(name, s)]
            print("| %s (%s) | %d %% | %+.1f [%+.0f, %+.0f] | %s |" % (
                name, "critical path" if name == "A" else "off it", s, real[(name, s)], lo, hi,
                " | ".join(cells)))
    shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
