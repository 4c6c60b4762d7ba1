"""The timer sampler on programs of known shape (timer_shapes.c), read from
its recordings (xsamp.py), whatever way the program ended.

usage: test_timer.py MODE SAMPLER_LIB TIMER_SHAPES PLUGIN_A PLUGIN_B SCRATCH
MODE: short | overrun | sigint | closefds | exit | kill | plugins | forkexec
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xsamp  # noqa: E402
from samples import Checker, run  # noqa: E402

mode, lib, shapes, plugin_a, plugin_b, scratch = sys.argv[1:7]
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
c = Checker(mode)

# Sanitized build: our sanitized library goes into our sanitized fixtures
# only; its runtime is not the first library there, which ASan accepts
# when told.
SANITIZED = bool(os.environ.get("XPTRACE_TEST_SANITIZE"))
if SANITIZED:
    os.environ["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")


def sample(out, args, **env):
    env = {k: str(v) for k, v in env.items()}
    env.update({"LD_PRELOAD": lib, "XPTRACE_OUTPUT": os.path.join(scratch, out)})
    return run([shapes] + args, env=env, cwd=scratch)


def only_recording(out):
    recs = xsamp.recordings(os.path.join(scratch, out))
    c.check(len(recs) == 1, f"{out}: {len(recs)} recordings")
    return recs[0] if recs else None


def weight_of(rec, function, clock=0):
    return sum(w for _, names, w in xsamp.stacks(rec, clock) if function in names)


def total_weight(rec, clock=0):
    return sum(w for _, _, w in xsamp.stacks(rec, clock))


if mode == "short":
    # Truth: 50/50 by construction (CPU-clock spins).  Without the random
    # phase and the charge at thread end the short threads read 1-20 %.
    for freq, ms, tolerance in ((1000, 800, 6), (100, 1500, 12)):
        rc, out, err = sample(f"f{freq}", ["short", str(ms)], XPTRACE_SAMPLE_FREQ=freq)
        c.check(rc == 0 and "ok" in out, f"{freq} Hz: exit {rc}: {err}")
        rec = only_recording(f"f{freq}")
        if not rec:
            continue
        by_thread = {}
        long_threads = set()
        for thread, names, w in xsamp.stacks(rec):
            by_thread[thread] = by_thread.get(thread, 0) + w
            if "long_thread" in names:
                long_threads.add(thread)
        c.check(len(long_threads) == 1, f"{freq} Hz: long thread indexes {long_threads}")
        long_w = sum(by_thread.get(t, 0) for t in long_threads)
        short_w = sum(w for t, w in by_thread.items() if t >= 1 and t not in long_threads)
        share = 100.0 * long_w / max(1, long_w + short_w)
        c.check(abs(share - 50) <= tolerance,
                f"{freq} Hz: long thread {share:.1f} % (short threads {100 - share:.1f} %), truth 50/50 "
                f"+-{tolerance}: {long_w} / {short_w}")
        c.check(len([t for t in rec.threads.values() if t["ended"]]) == 502,
                f"{freq} Hz: {len(rec.threads)} threads recorded, 502 expected")

elif mode == "overrun":
    # 1 kHz on CPU time: signals come at the kernel's tick (often 250 Hz),
    # each weighted by 1 + its overruns: the weights count the periods.
    rc, out, err = sample("o", ["spin", "600"], XPTRACE_SAMPLE_FREQ=1000)
    c.check(rc == 0, f"exit {rc}: {err}")
    rec = only_recording("o")
    if rec:
        main = rec.threads.get(0, {})
        cpu = main.get("cpu_ns", 0) * 1e-9
        w = total_weight(rec)
        signals = len([s for s in rec.samples if s[1] == 0])
        # The truth is main_spin's 600 ms of thread CPU (it spins on that
        # clock).  The thread's total also holds what ran before the timer
        # was armed (the loader, and ASan's start-up: 72 ms in one CI run),
        # which no timer can see: it bounds the total from above only.
        spin = weight_of(rec, "main_spin")
        c.check(cpu >= 0.6, f"main thread CPU {cpu:.3f} s")
        c.check(0.9 * 600 <= spin <= 1.1 * 600,
                f"main_spin {spin} weighted samples ({signals} signals in all) for 0.600 s of CPU at 1 kHz")
        c.check(w <= 1.1 * cpu * 1000, f"{w} weighted samples for {cpu:.3f} s of CPU at 1 kHz")
        c.check(spin >= 0.9 * w, f"main_spin {spin} of {w}")
        c.check(main.get("weight", (0, 0))[0] == w, f"thread total {main.get('weight')} vs samples {w}")

elif mode == "sigint":
    # The program's SIGINT is its own: it finds the default, installs its
    # handler, a query returns it, and it runs.
    rc, out, err = sample("s", ["sigint", "200"])
    c.check(rc == 0 and "ok" in out, f"own SIGINT handler: exit {rc}: {out} {err}")
    rec = only_recording("s")
    c.check(rec is not None and weight_of(rec, "main_spin") > 0, "no samples")
    # Python installs its KeyboardInterrupt handler only over SIG_DFL.
    py = shutil.which("python3")
    if py and not SANITIZED:
        code = ("import os, signal\n"
                "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, signal.getsignal(signal.SIGINT)\n"
                "try:\n    os.kill(os.getpid(), signal.SIGINT)\n    import time; time.sleep(1)\n"
                "except KeyboardInterrupt:\n    print('cleanup ran')\n")
        env = {"LD_PRELOAD": lib, "XPTRACE_OUTPUT": os.path.join(scratch, "py")}
        rc, out, err = run([py, "-c", code], env=env, cwd=scratch)
        c.check(rc == 0 and "cleanup ran" in out, f"python3: exit {rc}: {out} {err}")

elif mode == "closefds":
    rc, out, err = sample("c", ["closefds", "400"])
    c.check(rc == 0 and out == "ok\n", f"exit {rc}: {out!r}")
    rec = only_recording("c")
    if rec:
        cpu = rec.threads.get(0, {}).get("cpu_ns", 0) * 1e-9
        w = weight_of(rec, "main_spin")
        # Both halves, before and after fds 1 and 2 closed.
        c.check(w >= 0.8 * cpu * 100, f"{w} samples of main_spin for {cpu:.3f} s of CPU")
        c.check(rec.flags & xsamp.FLAG_EXITED, "no normal exit recorded")

elif mode in ("exit", "kill"):
    rc, out, err = sample("e", ["_exit" if mode == "exit" else "kill", "400"], XPTRACE_SAMPLE_FREQ=200)
    c.check(rc == (7 if mode == "exit" else -9), f"exit status {rc}")
    c.check("ok" in out, f"stdout {out!r}")
    rec = only_recording("e")
    if rec:
        w = weight_of(rec, "main_spin")
        # 0.4 s of CPU at 200 Hz: 80 periods; samples recorded before the
        # end survive in the file.
        c.check(w >= 50, f"{w} samples of main_spin survived (~80 expected)")
        if mode == "kill":
            c.check(not rec.flags & xsamp.FLAG_EXITED, "SIGKILL: an exit was recorded")

elif mode == "plugins":
    rc, out, err = sample("p", ["plugins", "600"], PLUGIN_A=plugin_a, PLUGIN_B=plugin_b)
    c.check(rc == 0 and "ok" in out, f"exit {rc}: {err}")
    rec = only_recording("p")
    if rec:
        a, b = weight_of(rec, "plugin_a_spin"), weight_of(rec, "plugin_b_spin")
        # 0.3 s each at 100 Hz: ~30 samples each, every one named right
        # although plugin A was unloaded before B came (often at its address).
        c.check(a >= 15 and b >= 15, f"plugin_a_spin {a}, plugin_b_spin {b}")
        names = {n for _, ns, _ in xsamp.stacks(rec) for n in ns}
        c.check(not any(n.startswith("[") and "plugin" in n for n in names), f"unnamed plugin frames: {names}")
        unmapped = [m for m in rec.maps if m["unmapped"] and "timer_plugin_a" in m["path"]]
        c.check(unmapped, "no unload of plugin A recorded")

elif mode == "forkexec":
    rc, out, err = sample("x", ["forkexec", "300"])
    c.check(rc == 0 and "ok" in out, f"exit {rc}: {err}")
    recs = xsamp.recordings(os.path.join(scratch, "x"))
    c.check(len(recs) == 3, f"{len(recs)} recordings (parent, forked child, exec'd program expected)")
    if len(recs) == 3:
        parent, child, execd = recs
        c.check(child.flags & xsamp.FLAG_FORKED and child.ppid == parent.pid, "forked child")
        c.check(execd.flags & xsamp.FLAG_EXECED and execd.pid == child.pid, "exec'd program")
        c.check(weight_of(parent, "main_spin") >= 15, f"parent: {weight_of(parent, 'main_spin')} samples")
        c.check(weight_of(execd, "main_spin") >= 15, f"exec'd: {weight_of(execd, 'main_spin')} samples")
        c.check(weight_of(child, "main_spin") == 0, "the forked child has the parent's samples")

else:
    c.check(False, f"unknown mode {mode}")

if not c.failures:
    shutil.rmtree(scratch, ignore_errors=True)  # recordings reserve disk blocks
sys.exit(c.done())
