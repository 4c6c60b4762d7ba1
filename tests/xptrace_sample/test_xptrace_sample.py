"""Tests of `xptrace sample` and `xptrace run --sample`.

usage: test_xptrace_sample.py MODE XPTRACE WORK_PROGRAM SAMPLES_PY_DIR SCRATCH
MODE: bad-input | help | sample | periods | preload | nested | run-sample
      | perf-blocked | perf-split | perf-rate | perf-handlers (--method perf;
        exit 77, skipped, where perf_event_open is refused)
"""
import os
import re
import shutil
import sys

mode, xptrace, work, helpers, scratch = sys.argv[1:6]
sys.path.insert(0, helpers)
from samples import user_frames, Checker, run, read_folded, inclusive, total  # noqa: E402

shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
c = Checker(mode)
marker = os.path.join(scratch, "marker")


def xp(*args, env=None):
    return run([xptrace] + list(args), env=env, cwd=scratch)


def expect_usage_error(want, *args, usage=True):
    if os.path.exists(marker):
        os.remove(marker)
    rc, out, err = xp(*args)
    c.check(rc == 2, f"{args}: exit {rc}, expected 2")
    c.check(want in err, f"{args}: no '{want}' in: {err}")
    lines = err.splitlines()
    c.check(bool(lines) and lines[0].startswith("xptrace: "), f"{args}: first line {lines[:1]}")
    c.check(sum(1 for line in lines if line.startswith("xptrace: ")) == 1, f"{args}: message lines: {err}")
    # a folder that cannot be made: that one line, no usage (issue 30)
    c.check(usage == any(line.startswith("usage: xptrace sample") or
                         line.startswith("usage: xptrace run") for line in lines),
            f"{args}: usage {'missing' if usage else 'printed'}")
    c.check(usage or len(lines) == 1, f"{args}: more than one line: {err}")
    c.check(not os.path.exists(marker), f"{args}: the command was run")


def folded(out, name="samples.folded"):
    st = read_folded(os.path.join(scratch, out, name))
    return user_frames(st) if st is not None else None


if mode == "bad-input":
    t = ["--", "touch", marker]
    expect_usage_error("unknown option '--bogus'", "sample", "--bogus", *t)
    expect_usage_error("frequency 'fast' is not a number of Hz", "sample", "-f", "fast", *t)
    expect_usage_error("frequency '0' is not a number of Hz", "sample", "--freq", "0", *t)
    expect_usage_error("frequency '-3' is not a number of Hz", "sample", "--freq=-3", *t)
    expect_usage_error("unknown clock 'sundial'", "sample", "--clock", "sundial", *t)
    expect_usage_error("depth '0' is not a number of frames", "sample", "--depth", "0", *t)
    expect_usage_error("depth '9999' is not a number of frames", "sample", "--depth", "9999", *t)
    expect_usage_error("period 'realtime:1:0:1' is not", "sample", "--periods", "realtime:1:0:1", *t)
    expect_usage_error("period 'wallclock:1:1:1' is not", "sample", "--periods", "realtime:0:1:1 wallclock:1:1:1", *t)
    expect_usage_error("period '1:1' is not", "sample", "--periods", "1:1", *t)
    expect_usage_error("period 'realtime:1:1:1.5' is not", "sample", "--periods", "realtime:1:1:1.5", *t)
    expect_usage_error("option '--periods' needs a value", "sample", "--periods")
    expect_usage_error("unknown method 'dtrace'", "sample", "--method", "dtrace", *t)
    expect_usage_error("the perf method takes --periods on one clock", "sample", "--method", "perf",
                       "--periods", "realtime:0:1:1 cputime:0:1:1", *t)
    expect_usage_error("--off-cpu needs the perf method", "sample", "--method", "timer", "--off-cpu", *t)
    expect_usage_error("--off-cpu and --clock realtime need --call-graph dwarf", "sample", "--off-cpu",
                       "--call-graph", "fp", *t)
    expect_usage_error("option '-f' needs a value", "sample", "-f")
    expect_usage_error("missing command", "sample", "-f", "10")
    expect_usage_error("missing command", "sample", "--")
    with open(os.path.join(scratch, "plainfile"), "w"):
        pass
    expect_usage_error("cannot create output directory", "sample", "-o", "plainfile/out", *t,
                       usage=False)
    rc, out, err = xp("sample", "-o", "notrun", "--", "./no-such-command")
    c.check(rc == 127 and "xptrace: ./no-such-command: No such file or directory" in err, f"missing command: {rc} {err}")
    c.check(not os.path.exists(os.path.join(scratch, "notrun")), "output folder made for a missing command")

elif mode == "help":
    for args in (["sample", "--help"], ["sample", "-h"]):
        rc, out, err = xp(*args)
        c.check(rc == 0 and out.startswith("usage: xptrace sample"), f"{args}: {rc} {out}")
        for word in ("--freq", "--clock", "--periods", "--depth", "--output", "clock:delay:duration:cycles"):
            c.check(word in out, f"sample --help lacks {word}")
    rc, out, err = xp("--help")
    c.check("xptrace sample" in out, "--help does not mention sample")
    rc, out, err = xp("run", "--help")
    c.check("--sample" in out, "run --help does not mention --sample")
    rc, out, err = xp("avail")
    for word in ("libxptrace_sampler.so", "XPTRACE_SAMPLE_FREQ", "XPTRACE_SAMPLE_CLOCK",
                 "XPTRACE_SAMPLE_CPUTIME_FREQ", "XPTRACE_SAMPLE_REALTIME_FREQ", "XPTRACE_SAMPLE_DEPTH",
                 "XPTRACE_SAMPLE_PERIODS"):
        c.check(word in out, f"avail lacks {word}")
    c.check("libxptrace_sampler.so (xptrace sample, run --sample) [found]" in out, "avail: sampler not found")

elif mode == "sample":
    rc, out, err = xp("sample", "-f", "150", "--clock", "both", "--depth", "32", "-o", "s", "--",
                      work, "threads", "2")
    c.check(rc == 0, f"exit {rc}: {err}")
    d = os.path.join(scratch, "s")
    c.check(f"xptrace: output in {d}" in err, f"output line: {err}")
    c.check(f"xptrace: samples {d}/samples.folded" in err, f"samples line: {err}")
    for name in ("samples.folded", "samples.csv", "samples_realtime.folded", "samples_realtime.csv"):
        c.check(os.path.exists(os.path.join(d, name)), f"{name} missing")
    cpu, rt = folded("s"), folded("s", "samples_realtime.folded")
    c.check(cpu is not None and inclusive(cpu, "heavy_work") > inclusive(cpu, "light_work") > 0, "cputime stacks")
    c.check(rt is not None and inclusive(rt, "heavy_work") > 0, "realtime stacks")
    # The main thread waits in pthread_join: seen by wall time only.
    c.check(rt is not None and inclusive(rt, "run_threads", "[main]") > 0, "realtime: no waiting main thread")
    c.check("cputime samples at 150 Hz" in err and "realtime samples at 150 Hz" in err, f"summary: {err}")
    # Wall time only: nothing said about CPU-time samples (a false "got 0
    # samples" diagnosis), and the real-time clock's own rate.
    env = dict(os.environ, XPTRACE_SAMPLE_REALTIME_FREQ="50")
    rc, out, err = xp("sample", "--clock", "realtime", "-o", "rt", "--", work, "threads", "2", env=env)
    c.check(rc == 0 and "realtime samples at 50 Hz" in err, f"realtime rate: {err}")
    c.check("cputime samples" not in err and "got 0 samples" not in err and
            "samples per CPU-second" not in err, f"realtime: CPU-time messages: {err}")
    # The same folder again: the new files take new names, and every
    # message is about this run's (the last line named the first run's).
    rc, out, err = xp("sample", "-f", "150", "-o", "s", "--", work, "threads", "2")
    c.check(rc == 0 and f"xptrace: samples {d}/samples-1.folded" in err, f"second run: {err}")
    # Exit status and death by signal are the command's.
    rc, out, err = xp("sample", "--method", "timer", "-o", "t", "--", work, "term", "1")
    c.check(rc == 128 + 15 and "killed by signal 15 (SIGTERM)" in err, f"term: {rc} {err}")
    # What was recorded before the signal is reported by the launcher.
    st = folded("t")
    c.check(st is not None and inclusive(st, "heavy_work") > 0, f"term: samples lost: {err}")
    rc, out, err = xp("sample", "-o", "u", "--", work, "no-such-mode")
    c.check(rc == 2, f"exit status of the command: {rc}")
    # Default folder name.
    rc, out, err = xp("sample", "--", work, "threads", "1")
    dirs = [x for x in os.listdir(scratch) if x.startswith("xptrace-sampler_work-")]
    c.check(rc == 0 and len(dirs) == 1, f"default folder: {dirs}")

elif mode == "periods":
    rc, out, err = xp("sample", "--periods", "realtime:100:1:1", "-o", "none", "--", work, "threads", "1")
    c.check(rc == 0 and not folded("none"), f"excluded run has samples: {folded('none')}")
    c.check("no sampling window opened" in err, f"no samples, and no reason: {err}")
    rc, out, err = xp("sample", "--periods", "realtime:0:100:0", "-o", "all", "--", work, "threads", "1")
    c.check(rc == 0 and folded("all") and total(folded("all")) > 0, "included run has no samples")

elif mode == "preload":
    # The user's LD_PRELOAD is kept, after the sampler.
    libm = "libm.so.6"
    rc, out, err = xp("sample", "--method", "timer", "-v", "-o", "p", "--", work, "threads", "1",
                      env={"LD_PRELOAD": libm})
    lines = [line for line in err.splitlines() if line.startswith("xptrace: LD_PRELOAD=")]
    c.check(len(lines) == 1 and lines[0].endswith("libxptrace_sampler.so:" + libm), f"LD_PRELOAD: {lines}")
    c.check("xptrace: running " in err, "verbose: no command line")
    c.check(rc == 0 and folded("p") and total(folded("p")) > 0, "no samples with a user preload")

elif mode == "nested":
    # Two programs exec'd by a sampled shell: one summary for the tree,
    # each process its own root frame.
    script = f"'{work}' threads 1; '{work}' threads 1"
    rc, out, err = xp("sample", "--method", "timer", "-o", "n", "--", "/bin/sh", "-c", script)
    c.check(rc == 0, f"exit {rc}: {err}")
    c.check(err.count("cputime samples at") == 1, f"one summary expected: {err}")
    st = folded("n") or []
    roots = {frames[0] for frames, _ in st if inclusive([(frames, 1)], "heavy_work")}
    c.check(len(roots) == 2 and all(r.startswith("[sampler_work-") for r in roots),
            f"process roots: {roots}")
    # A line per process sampled: the two programs, and the shell when a
    # tick happened to fall in it (1 sample in a CI run).
    procs = [l.split() for l in err.splitlines() if l.startswith("  process ")]
    c.check(sum(p[2] == "sampler_work:" for p in procs) == 2 and
            all(p[2] in ("sampler_work:", "sh:", "dash:") for p in procs),
            f"per-process lines: {err}")

elif mode == "run-sample":
    # The same front end as `xptrace sample`: the perf method by default
    # where the kernel allows it, --method and --freq taken.
    rc, out, err = xp("sample", "--method", "perf", "-o", "probe", "--", "true")
    if "using the timer method" not in err:
        rc, out, err = xp("run", "--sample", "-f", "1000", "-c", "stats", "-o", "rp", "--", work, "threads", "1")
        c.check(rc == 0 and "method perf (" in err and "samples per CPU-second" in err, f"run --sample: {err}")
        st = folded(os.path.join(scratch, "rp"))
        c.check(st is not None and inclusive(st, "heavy_work") > 0, f"run --sample (perf): {st}")
        c.check(total(st or []) >= 100, f"run --sample -f 1000: {total(st or [])} samples")
        # --off-cpu as under `xptrace sample`: sleep's 50 ms in nanosleep
        rc, out, err = xp("run", "--sample", "--off-cpu", "-c", "stats", "-o", "ro", "--", "sleep", "0.05")
        if "no off-CPU profile" not in err:
            off = folded(os.path.join(scratch, "ro"), "samples_offcpu.folded") or []
            slept = sum(k for f, k in off if any("nanosleep" in x for x in f))
            c.check(rc == 0 and 45000 <= slept <= 1000000, f"run --sample --off-cpu: {slept} us slept: {err}")
    rc, out, err = xp("run", "--sample", "--method", "perf", "--periods", "cputime:1:1:1 realtime:1:1:1", "-o", "bad", "--", "true")
    c.check(rc == 2 and "on one clock" in err, f"--method perf with --periods on two clocks: {rc} {err}")
    rc, out, err = xp("run", "--clock", "realtime", "-o", "bad", "--", "true")
    c.check(rc == 2 and "--clock needs --sample" in err, f"--clock without --sample: {rc} {err}")
    rc, out, err = xp("run", "--off-cpu", "-o", "bad", "--", "true")
    c.check(rc == 2 and "--off-cpu needs --sample" in err, f"--off-cpu without --sample: {rc} {err}")
    rc, out, err = xp("run", "--method", "timer", "-o", "bad", "--", "true")
    c.check(rc == 2 and "needs --sample" in err, f"--method without --sample: {rc} {err}")
    rc, out, err = xp("run", "--sample", "--method", "timer", "-c", "stats", "-o", "r", "--", work, "threads", "1")
    c.check(rc == 0, f"exit {rc}: {err}")
    # under `run`, the process writes into a folder of its own in r
    procs = [p for p in os.listdir(os.path.join(scratch, "r")) if p.startswith("sampler_work-")]
    c.check(len(procs) == 1, f"run --sample: process folders {procs}")
    # one sample session for the run's process tree, at the top of r
    d = os.path.join(scratch, "r")
    st = folded(d)
    c.check(st is not None and inclusive(st, "heavy_work") > 0, f"run --sample: {st}")
    c.check(f"xptrace: samples {d}/samples.folded" in err, f"run --sample output line: {err}")
    # A command too short to be sampled: the line says why.
    rc, out, err = xp("run", "--sample", "--method", "timer", "-c", "stats", "-o", "short", "--", "true")
    c.check(rc == 0 and "no samples written in" in err and "ms of CPU time, about" in err
            and "samples faster" in err, f"run --sample of true: {rc} {err}")

elif mode.startswith("perf-"):
    rc, out, err = xp("sample", "--method", "perf", "-o", "probe", "--", "true")
    if "using the timer method" in err:
        print(f"SKIP [{mode}]: {err.strip()}")
        sys.exit(77)

    def perf_run(name, fixture_mode, units, freq="1000"):
        rc, out, err = xp("sample", "--method", "perf", "-f", freq, "-o", name, "--", work, fixture_mode, units)
        c.check(rc == 0, f"{fixture_mode}: exit {rc}: {err}")
        c.check("method perf" in err, f"{fixture_mode}: no method line: {err}")
        c.check("libxptrace_sampler" not in err and not os.path.exists(os.path.join(scratch, name, "sampler_work-")),
                f"{fixture_mode}: the in-process sampler ran")
        return out, err, folded(name) or []

    def self_share(stacks, function):
        n = total(stacks)
        return 100.0 * sum(cnt for frames, cnt in stacks if frames[-1] == function) / n if n else 0.0

    if mode == "perf-blocked":
        # A thread blocking every signal is sampled like its twin.
        out, err, st = perf_run("b", "blocked", "3")
        share = self_share(st, "blocked_spin")
        print(f"blocked_spin {share:.1f}% free_spin {self_share(st, 'free_spin'):.1f}% of {total(st)} samples")
        c.check(40 <= share <= 60, f"blocked_spin share {share:.1f}% (expected 50 +- 10): {st}")
    elif mode == "perf-split":
        out, err, st = perf_run("s", "split", "3")
        # Truth: the threads' CPU times as the program measured them (work
        # of 40/30/20/10 is not that time on a busy machine's shared cores).
        cpu = {k: float(v) for k, v in re.findall(r"(spin_\d+)=([0-9.]+)", out)}
        c.check(len(cpu) == 4, f"no per-thread CPU times: {out!r}")
        for fn in ("spin_40", "spin_30", "spin_20", "spin_10"):
            want = 100.0 * cpu.get(fn, 0) / (sum(cpu.values()) or 1)
            share = self_share(st, fn)
            print(f"{fn} {share:.1f}% (CPU time {want:.1f})")
            c.check(abs(share - want) <= 5, f"{fn}: {share:.1f}%, expected {want:.1f} +- 5")
        # The four spinning threads; the main thread may have a few samples
        # of its own start-up and thread creation (3 on a slow guest).
        threads = {frames[0] for frames, _ in st if frames[-1].startswith("spin_")}
        c.check(len(threads) == 4, f"threads: {threads}")
        main_share = 100.0 * sum(cnt for frames, cnt in st if frames[0] == "[main]") / max(1, total(st))
        c.check(main_share <= 2, f"main thread {main_share:.1f}% of the samples")
    elif mode == "perf-rate":
        out, err, st = perf_run("r", "split", "3")
        cpu = float(out.split("cpu_seconds=")[1].split()[0])
        rate = total(st) / cpu if cpu else 0
        print(f"{total(st)} samples in {cpu:.3f} CPU-s: {rate:.0f} per CPU-second at 1000 Hz requested")
        c.check(rate >= 900, f"{rate:.0f} samples per CPU-second, expected >= 900")
        c.check("samples per CPU-second" in err, f"no effective rate printed: {err}")
    elif mode == "perf-handlers":
        # Nothing of ours in the program: its handlers stay its own.
        out, err, st = perf_run("h", "handlers", "1")
        c.check("handlers=own" in out, f"handlers: {out} {err}")
        c.check(total(st) > 0, "handlers: no samples")
    else:
        c.check(False, f"unknown mode {mode}")

else:
    c.check(False, f"unknown mode {mode}")

sys.exit(c.done())
