"""Accuracy of `xptrace sample` on programs of known shape (shape_work.c),
under both methods: the shares of the profile against the threads' CPU
times as the kernel counted them in the same run (printed by the program).

usage: test_shapes.py MODE XPTRACE SHAPE_WORK TESTS_DIR SCRATCH
MODE: timer-short | timer-short-100 | perf-short | perf-short-100 | perf-read
      | perf-short-thread (inherited per-thread events, user space only, as
        an unprivileged user gets them: what is lost is said, truly)
      | timer-worker (long and short threads on one start routine: the
        undelivered periods of short threads are not given the long one's stacks)
      | perf-periods (--periods of wall time under the perf method: the
        samples outside the windows are left out)
      | perf-attach (xptrace sample -p PID on a running program, 1 s after
        its start: its 40/30/20/10 rounds)
      | perf-periods-cpu (--periods of process CPU time under the perf
        method, both front ends: the window's samples only)
      | perf-periods-run (one front end: `sample` and `run --sample` with the
        same --periods both take the perf method and give the same
        40/30/20/10 shares in the window)
      | perf-offcpu (--off-cpu --clock both: a thread computing 25 %,
        sleeping 50 % in nanosleep and waiting 25 % on a mutex of its wall
        time, by construction; its wall-time profile adds up to its lifetime)
      | perf-attach-offcpu (the same with -p on the running program, its
        threads started once xptrace is attached)
Exit 77 (skipped) where the method cannot run here.

Tolerance: 5 points or 3 binomial standard deviations of the samples
taken, whichever is larger (at 100 Hz, ~200 samples: ~10 points).  The
wrong answers these tests were written against were 40 points off
(perf at 100 Hz: 91/9 for 50/50) or put 42-51 % of the time in `st`,
a function that only calls `short_work`."""
import math
import os
import re
import shutil
import sys

mode, xptrace, work, tests, scratch = sys.argv[1:6]
sys.path.insert(0, os.path.join(tests, "sampler"))
from samples import Checker, attach_and_release, run, read_folded, total  # noqa: E402

shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
c = Checker(mode)
method = mode.split("-")[0]
freq = "100" if mode.endswith(("-100", "-thread")) else "1000"
sanitized = bool(os.environ.get("XPTRACE_TEST_SANITIZE"))
if method == "timer" and sanitized:
    print(f"SKIP [{mode}]: the sanitized sampler cannot go into an unsanitized fixture")
    sys.exit(77)


def xp(*args, env=None):
    return run([xptrace] + list(args), cwd=scratch, timeout=170, env=env)


rc, out, err = xp("sample", "--method", "perf", "-o", "probe", "--", "true")
if method == "perf" and "using the timer method" in err:
    print(f"SKIP [{mode}]: {err.strip()}")
    sys.exit(77)


def sample(name, *cmd, env=None):
    rc, out, err = xp("sample", "--method", method, "-f", freq, "-o", name, "--", work, *cmd, env=env)
    c.check(rc == 0, f"exit {rc}: {err}")
    stacks = read_folded(os.path.join(scratch, name, "samples.folded")) or []
    m = re.search(r"^cpu (.*)$", out, re.M)
    cpu = {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split())} if m else {}
    c.check(bool(cpu), f"the program printed no CPU times: {out} {err}")
    return err, stacks, cpu


def incl(stacks, fn):
    return sum(k for f, k in stacks if fn in f[1:])


def self_(stacks, fn):
    return sum(k for f, k in stacks if f[-1] == fn)


def within(name, got, want, n, least=5.0):
    tol = max(least, 300.0 * math.sqrt(max(want, 1) / 100 * max(100 - want, 1) / 100 / max(n, 1)))
    print(f"{name}: {got:.1f}% (truth {want:.1f}% from the kernel's CPU times, +- {tol:.1f})")
    c.check(abs(got - want) <= tol, f"{name} {got:.1f}% against {want:.1f}% +- {tol:.1f}")


if mode.startswith(("timer-short", "perf-short")):
    # One long thread next to 500 threads of 2 ms, one after the other.
    err, st, cpu = sample("s", "short", "500", "2")
    n = total(st)
    all_cpu = sum(cpu.values()) or 1
    if n:
        within("long_work", 100.0 * incl(st, "long_work") / n, 100.0 * cpu.get("long", 0) / all_cpu, n)
        within("st (short threads)", 100.0 * incl(st, "st") / n, 100.0 * cpu.get("short", 0) / all_cpu, n)
        # st only calls short_work: its own samples are misattributed.
        st_self = 100.0 * self_(st, "st") / n
        print(f"st self {st_self:.1f}%, short_work self {100.0 * self_(st, 'short_work') / n:.1f}%")
        c.check(st_self <= 3, f"st has {st_self:.1f}% self time; it only calls short_work")
        # Under short_work (itself or the clock reads it makes): at 100 Hz
        # the timer method's few captures of short threads may hold one
        # in clock_gettime, and their charges follow it.
        c.check(incl(st, "short_work") >= 0.85 * incl(st, "st"),
                f"short_work {incl(st, 'short_work')} of st's {incl(st, 'st')} samples")
    c.check(n >= 0.5 * all_cpu * float(freq), f"{n} samples for {all_cpu:.3f} CPU-s at {freq} Hz")
    # Never the kernel-time explanation for threads that ran user code.
    c.check("its time was in the kernel" not in err, f"a false kernel-time diagnosis: {err}")
    if method == "timer":
        c.check(re.search(r"\d+ stack captures stand for the \d+ cputime samples", err),
                f"captures and weighted samples not told apart: {err}")
elif mode == "perf-read":
    # A thread in read() (kernel time) next to one computing: as root the
    # perf method samples the kernel too and the split is the CPU times'.
    err, st, cpu = sample("r", "read", "500")
    n = total(st)
    all_cpu = sum(cpu.values()) or 1
    if os.geteuid() != 0 and not re.search(r"kernel frames", err):
        c.check("kernel" in err, f"kernel time not sampled and not said: {err}")
    elif n:
        within("read_work", 100.0 * incl(st, "read_work") / n, 100.0 * cpu.get("read", 0) / all_cpu, n)
        within("compute_work", 100.0 * incl(st, "compute_work") / n, 100.0 * cpu.get("compute", 0) / all_cpu, n)
        kernel = sum(k for f, k in st if "read_work" in f and f[-1].endswith("_[k]"))
        c.check(kernel >= 0.5 * incl(st, "read_work"),
                f"{kernel} of read_work's {incl(st, 'read_work')} samples with kernel frames")
elif mode == "perf-periods":
    # phase_a for the first second, phase_b for 1.5 s after; the window
    # 1.3-1.8 s after the exec is inside phase_b.
    rc, out, err = xp("sample", "-f", "1000", "--periods", "realtime:1.3:0.5:1", "-o", "w", "--",
                      work, "phases", "1", "1.5")
    c.check(rc == 0 and "method perf (" in err, f"--periods under the perf method: {rc} {err}")
    st = read_folded(os.path.join(scratch, "w", "samples.folded")) or []
    a, b = incl(st, "phase_a"), incl(st, "phase_b")
    print(f"phase_a {a} samples, phase_b {b} (window inside phase_b)")
    c.check(a == 0 and b >= 20, f"phase_a {a}, phase_b {b} samples")
    c.check(total(st) <= 0.5 * 1000 * 2 + 50, f"{total(st)} samples in a 0.5 s window at 1 kHz")
elif mode == "perf-periods-cpu":
    # Windows of CPU time under the perf method, counted by the samples
    # themselves (periods of CPU time each): phase_a for the first 1 s of
    # the process's CPU time, phase_b for 1 s more; 1.3-1.8 s lies in
    # phase_b however loaded the machine is, under both front ends.
    for front in ("sample", "run"):
        args = ["sample"] if front == "sample" else ["run", "--sample", "-c", "stats"]
        rc, out, err = xp(*args, "-f", "1000", "--periods", "process_cputime:1.3:0.5:1", "-o", front, "--",
                          work, "cphases", "1", "1")
        c.check(rc == 0 and "method perf (" in err, f"{front}: CPU-time --periods not under the perf method: {rc} {err}")
        st = read_folded(os.path.join(scratch, front, "samples.folded")) or []
        a, b = incl(st, "phase_a"), incl(st, "phase_b")
        print(f"{front}: phase_a {a} samples, phase_b {b} (a window of 0.5 CPU-s inside phase_b)")
        c.check(a == 0 and b >= 20, f"{front}: phase_a {a}, phase_b {b} samples")
        c.check(total(st) <= 500 + 5, f"{front}: {total(st)} samples in a window of 0.5 CPU-s at 1 kHz")
elif mode == "perf-periods-run":
    # The same options under both front ends: the same method, the same
    # window, the same shares (each 5 points from the truth and the other).
    shares, counts = {}, {}
    for front in ("sample", "run"):
        args = ["sample"] if front == "sample" else ["run", "--sample", "-c", "stats"]
        rc, out, err = xp(*args, "-f", "1000", "--periods", "realtime:0.3:0.9:1", "-o", front, "--",
                          work, "loop", "1.5")
        c.check(rc == 0 and "method perf (" in err, f"{front}: not the perf method: {rc} {err}")
        st = read_folded(os.path.join(scratch, front, "samples.folded")) or []
        n = total(st)
        counts[front] = n
        print(f"{front}: {n} samples in the 0.9 s window")
        # one thread: at most 0.9 CPU-s in the window (the run is 1.5 s)
        c.check(20 <= n <= 0.9 * 1000 * 1.1 + 20, f"{front}: {n} samples in a 0.9 s window at 1 kHz")
        shares[front] = {fn: 100.0 * incl(st, fn) / max(n, 1) for fn in ("spin_40", "spin_30", "spin_20", "spin_10")}
        for fn, want in (("spin_40", 40), ("spin_30", 30), ("spin_20", 20), ("spin_10", 10)):
            within(f"{front}: {fn}", shares[front][fn], want, n)
    # Two runs' shares differ by sampling noise: 4 standard deviations of
    # the difference of two proportions (5.0 points for 30 % at 165
    # samples each, a loaded machine's window), never under 5.
    n1, n2 = max(counts.get("sample", 1), 1), max(counts.get("run", 1), 1)
    for fn in shares["sample"]:
        d = abs(shares["sample"][fn] - shares["run"][fn])
        p = (shares["sample"][fn] + shares["run"][fn]) / 200.0
        tol = max(5.0, 400.0 * (p * (1 - p) * (1.0 / n1 + 1.0 / n2)) ** 0.5)
        c.check(d <= tol, f"{fn}: {shares['sample'][fn]:.1f}% under sample, {shares['run'][fn]:.1f}% under "
                          f"run --sample (+- {tol:.1f})")
elif mode == "timer-worker":
    err, st, cpu = sample("w", "worker", "500", "2")
    n = total(st)
    all_cpu = sum(cpu.values()) or 1
    if n:
        within("long_work", 100.0 * incl(st, "long_work") / n, 100.0 * cpu.get("long", 0) / all_cpu, n)
        within("short_work", 100.0 * incl(st, "short_work") / n, 100.0 * cpu.get("short", 0) / all_cpu, n)
elif mode == "perf-attach":
    import subprocess
    import time
    prog = subprocess.Popen([work, "loop", "6"], stdout=subprocess.PIPE, text=True)
    c.check(prog.stdout.readline().strip() == "ready", "shape_work loop did not start")
    time.sleep(1)

    def cpu_of(pid):  # utime + stime, seconds
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    cpu0 = cpu_of(prog.pid)
    rc, out, err = xp("sample", "-f", "1000", "-p", str(prog.pid), "--duration", "2", "-o", "a")
    cpu = cpu_of(prog.pid) - cpu0  # a little more than the window's
    c.check(rc == 0 and f"attached to shape_work (pid {prog.pid})" in err, f"attach: {rc} {err}")
    st = read_folded(os.path.join(scratch, "a", "samples.folded")) or []
    n = total(st)
    print(f"{n} samples for {cpu:.3f} CPU-s of the program around the window")
    c.check(n >= 0.6 * cpu * 1000, f"{n} samples for {cpu:.3f} CPU-s at 1 kHz")
    for fn, want in (("spin_40", 40), ("spin_30", 30), ("spin_20", 20), ("spin_10", 10)):
        if n:
            within(fn, 100.0 * incl(st, fn) / n, want, n, least=3.0)
    c.check(prog.wait(timeout=60) == 0, "the program did not end well after the attach")
    # A process that ends 0.5 s after the attach and stays a zombie (this
    # test reaps it only afterwards): the attach ends with it, and its CPU
    # time is what the kernel says it used (it said 0.000 CPU-seconds and
    # "0 samples per CPU-second" once the process was gone before a reading).
    prog = subprocess.Popen([work, "loop", "0.5"], stdout=subprocess.PIPE, text=True)
    c.check(prog.stdout.readline().strip() == "ready", "shape_work loop did not start")
    cpu0 = cpu_of(prog.pid)
    rc, out, err = xp("sample", "-f", "1000", "-p", str(prog.pid), "-o", "short")
    cpu = cpu_of(prog.pid) - cpu0  # its final times: a zombie until the wait below
    m = re.search(r"(\d+) samples per CPU-second \((\d+) samples, ([0-9.]+) CPU-seconds\)", err)
    print(f"short process: {m.group(0) if m else err.strip()}; {cpu:.3f} CPU-s from before the attach")
    c.check(rc == 0 and m is not None, f"short attach: {rc} {err}")
    if m:
        said = float(m.group(3))
        # CPU time from /proc is in ticks (10 ms): two readings, two ticks.
        c.check(0 < said <= cpu + 0.02, f"{said} CPU-s said, {cpu:.3f} used from before the attach")
        c.check(said >= 0.8 * int(m.group(2)) / 1000 - 0.02,
                f"{m.group(2)} samples at 1 kHz in {said} CPU-s said: the end was not counted")
    c.check(prog.wait(timeout=60) == 0, "the short program did not end well")
    rc, out, err = xp("sample", "-p", "999999999", "-o", "gone")
    c.check(rc == 2 or (rc == 1 and "cannot attach to" in err), f"attach to no process: {rc} {err}")
elif mode == "perf-short-thread":
    # Inherited events lose the period in progress whenever a thread ends:
    # the shares are wrong here (the long thread reads ~90 %), and the
    # output must say why, never that the time was in the kernel.
    err, st, cpu = sample("t", "short", "500", "2", env={"XPTRACE_SAMPLE_SCOPE": "thread", "XPTRACE_SAMPLE_KERNEL": "0"})
    c.check("per-thread events, user time only" in err, f"not the per-thread user-only scope: {err}")
    c.check("its time was mostly in the kernel" not in err and "its time was in the kernel" not in err,
            f"a false kernel-time diagnosis: {err}")
    n, due = total(st), sum(cpu.values()) * float(freq)
    print(f"{n} samples for {due:.0f} due")
    if n < 0.8 * due:
        c.check(re.search(r"\d+ samples for [0-9.]+ CPU-s of user time at 100 Hz \(\d+ due\): per-thread events "
                          r"lose the period in progress", err), f"{n} samples of {due:.0f} due, not said: {err}")
elif mode in ("perf-offcpu", "perf-attach-offcpu"):
    def share(name, got, want):  # of wall time, by construction: 5 points
        print(f"{name}: {got:.1f}% (truth {want:.1f}%, as the thread timed its parts, +- 5)")
        c.check(abs(got - want) <= 5, f"{name} {got:.1f}% against {want:.1f}% +- 5")

    if mode == "perf-offcpu":
        rc, out, err = xp("sample", "-f", "1000", "--off-cpu", "--clock", "both", "-o", "o", "--", work, "offcpu", "25")
    else:
        # Attached to its three threads while they wait for a line on
        # stdin: the waiter's whole work is in the profile, the same truth.
        import subprocess
        prog = subprocess.Popen([work, "offcpu", "25", "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        c.check(prog.stdout.readline().strip() == "ready", "shape_work offcpu did not start")
        rc, out, err = attach_and_release([xptrace, "sample", "-f", "1000", "--off-cpu", "--clock", "both", "-p",
                                           str(prog.pid), "-o", "o"], prog, scratch)
        c.check(prog.returncode == 0, f"shape_work offcpu exit {prog.returncode}")
        if "sampling a running process needs per-CPU events" in err:
            print(f"SKIP [{mode}]: {err.strip()}")
            sys.exit(77)
        c.check("context switches of 3 attached threads" in err, f"not the attached threads' switches: {err}")
    if "no off-CPU profile" in err:
        print(f"SKIP [{mode}]: {err.strip()}")
        sys.exit(77)
    c.check(rc == 0 and "method perf (" in err, f"--off-cpu: {rc} {err}")
    m = re.search(r"wall waiter=([0-9.]+) compute=([0-9.]+) sleep=([0-9.]+) lock=([0-9.]+)", out)
    c.check(bool(m), f"the program printed no lifetime: {out}")
    life_us, t_compute, t_sleep, t_lock = (float(x) * 1e6 for x in m.groups()) if m else (1, 0, 0, 0)
    # 25/50/25 by construction; a loaded machine moves it (a preempted
    # thread leaves wait_compute late): the truth is what the parts took.
    print(f"waiter's parts: compute {100 * t_compute / life_us:.1f}%, sleep {100 * t_sleep / life_us:.1f}%, "
          f"lock {100 * t_lock / life_us:.1f}%")
    off = [s_ for s_ in read_folded(os.path.join(scratch, "o", "samples_offcpu.folded")) or []
           if s_[0][0].endswith(":waiter]")]
    rt = [s_ for s_ in read_folded(os.path.join(scratch, "o", "samples_realtime.folded")) or []
          if s_[0][0].endswith(":waiter]")]
    n_off, n_rt = total(off), total(rt)
    print(f"waiter: lived {life_us / 1e3:.1f} ms; wall-time profile {n_rt / 1e3:.1f} ms, "
          f"off-CPU {n_off / 1e3:.1f} ms")
    # The wall-time profile adds up to the thread's lifetime (CPU samples
    # of 1 ms each and the intervals off the CPU, preempted ones included).
    c.check(abs(n_rt - life_us) <= 0.05 * life_us, f"wall-time profile {n_rt} us for {life_us:.0f} us of life")
    if n_rt:
        share("wall: wait_compute", 100.0 * incl(rt, "wait_compute") / n_rt, 100.0 * t_compute / life_us)
        share("wall: sleep_part", 100.0 * incl(rt, "sleep_part") / n_rt, 100.0 * t_sleep / life_us)
        share("wall: lock_part", 100.0 * incl(rt, "lock_part") / n_rt, 100.0 * t_lock / life_us)
    # Off-CPU: where it blocked (not where it was preempted), with stacks.
    share("off-CPU of the lifetime", 100.0 * n_off / life_us, 100.0 * (t_sleep + t_lock) / life_us)
    if n_off:
        share("off-CPU: sleep_part", 100.0 * incl(off, "sleep_part") / n_off, 100.0 * t_sleep / (t_sleep + t_lock))
        share("off-CPU: lock_part", 100.0 * incl(off, "lock_part") / n_off, 100.0 * t_lock / (t_sleep + t_lock))
        slept = sum(k for f, k in off if "sleep_part" in f and any("nanosleep" in x for x in f[f.index("sleep_part") + 1:]))
        waited = sum(k for f, k in off if "lock_part" in f and any("lock" in x for x in f[f.index("lock_part") + 1:]))
        c.check(slept >= 0.95 * incl(off, "sleep_part"), f"nanosleep under sleep_part in {slept} of {incl(off, 'sleep_part')} us")
        c.check(waited >= 0.95 * incl(off, "lock_part"), f"the mutex wait under lock_part in {waited} of {incl(off, 'lock_part')} us")
        c.check(all(f[1] in ("start_thread", "__clone3", "clone3", "clone") for f, _ in off),
                f"off-CPU stacks not unwound to the thread's start: {[f for f, _ in off][:3]}")
    c.check(re.search(r"[0-9.]+ s off-CPU", err), f"no off-CPU summary: {err}")
    # The other outputs carry it: the flame graph in microseconds, and
    # report --format pprof a value column "offcpu" with the same times.
    svg = open(os.path.join(scratch, "o", "samples_offcpu.svg")).read() if n_off else ""
    for fn in ("sleep_part", "lock_part"):
        us = sum(k for f, k in read_folded(os.path.join(scratch, "o", "samples_offcpu.folded")) if fn in f[1:])
        c.check(f'{fn}" data-d="5" data-v="{us}"' in svg and f"{fn} ({us} us," in svg,
                f"samples_offcpu.svg: {fn} not {us} us")
    import shutil as sh
    if sh.which("go"):
        rc, _, perr = xp("report", "o", "--format", "pprof", "-o", "p.pb.gz")
        c.check(rc == 0, f"report --format pprof: {rc} {perr}")
        env = dict(os.environ, HOME=scratch, PPROF_TMPDIR=scratch)
        rc, top, perr = run(["go", "tool", "pprof", "-symbolize=none", "-sample_index=offcpu", "-unit=us", "-top",
                             os.path.join(scratch, "p.pb.gz")], cwd=scratch, timeout=120, env=env)
        all_off = total(read_folded(os.path.join(scratch, "o", "samples_offcpu.folded")) or [])
        c.check(rc == 0 and f"Total samples = {all_off}us" in top, f"pprof offcpu total not {all_off} us: {top} {perr}")
        for fn in ("sleep_part", "lock_part"):
            us = sum(k for f, k in read_folded(os.path.join(scratch, "o", "samples_offcpu.folded")) if fn in f[1:])
            c.check(re.search(rf"\s{us}us\s+[0-9.]+%\s+{fn}$", top, re.M), f"pprof offcpu: {fn} not {us} us: {top}")
        rc, top, perr = run(["go", "tool", "pprof", "-symbolize=none", "-top", os.path.join(scratch, "p.pb.gz")],
                            cwd=scratch, timeout=120, env=env)
        c.check(rc == 0 and "Type: cpu" in top and "wait_compute" in top, f"pprof cpu: {top} {perr}")
else:
    c.check(False, f"unknown mode {mode}")
sys.exit(c.done())
