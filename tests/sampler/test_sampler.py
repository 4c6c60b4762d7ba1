"""Tests of libxptrace_sampler.so preloaded into sampler_work, read from
its recordings (xsamp.py; the reports are the launcher's, tested in
tests/xptrace_sample).

usage: test_sampler.py MODE SAMPLER_LIB WORK_PROGRAM SCRATCH
MODE: threads | periods | env | fork | sigprof | exit | term | depth
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xsamp  # noqa: E402
from samples import Checker, run, total, inclusive, threads, cpu_seconds  # noqa: E402

mode, lib, work, scratch = sys.argv[1:5]
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
c = Checker(mode)
if os.environ.get("XPTRACE_TEST_SANITIZE"):  # see test_timer.py
    os.environ["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")


def sample(out, args, **env):
    env = {k: str(v) for k, v in env.items()}
    env.update({"LD_PRELOAD": lib, "XPTRACE_OUTPUT": os.path.join(scratch, out)})
    return run([work] + args, env=env, cwd=scratch)


def folded(out, clock=0):
    return xsamp.folded(os.path.join(scratch, out), clock)


def messages(err):
    """The library's lines, less the one saying where the samples are."""
    return [line for line in err.splitlines()
            if line.startswith("xptrace: ") and "samples recorded in" not in line]


if mode == "threads":
    freq = 200
    rc, out, err = sample("t", ["threads", "4"], XPTRACE_SAMPLE_FREQ=freq)
    c.check(rc == 0, f"exit {rc}: {err}")
    stacks = folded("t")
    if c.check(stacks is not None, "no samples.folded"):
        heavy, light = inclusive(stacks, "heavy_work"), inclusive(stacks, "light_work")
        c.check(heavy > 0 and light > 0, f"heavy {heavy}, light {light}")
        # 3:1 by construction; generous bounds (behaviour, not speed).
        c.check(light > 0 and 1.5 <= heavy / light <= 6, f"heavy/light = {heavy}/{light}")
        for t in ("[thread-1]", "[thread-2]"):
            c.check(inclusive(stacks, "heavy_work", t) > 0 and inclusive(stacks, "light_work", t) > 0,
                    f"{t} lacks heavy_work or light_work: {threads(stacks)}")
            c.check(any(f[0] == t and "worker" in f for f, _ in stacks), f"{t}: no worker frame")
        # Outer frames come first: worker before work before heavy_work.
        for frames, _ in stacks:
            if "heavy_work" in frames and "work" in frames:
                c.check(frames.index("work") < frames.index("heavy_work"), f"order: {frames}")
        cpu = cpu_seconds(out)
        n = total(stacks)
        if c.check(cpu is not None and cpu > 0, f"no cpu time in {out!r}"):
            expected = freq * cpu
            c.check(0.3 * expected <= n <= 1.5 * expected,
                    f"{n} samples for {cpu:.2f} s of CPU at {freq} Hz (expected ~{expected:.0f})")
        c.check("samples recorded in" in err, f"no word on where the samples are: {err}")

elif mode == "periods":
    # A window far after the end: nothing.
    rc, out, err = sample("none", ["threads", "2"], XPTRACE_SAMPLE_PERIODS="realtime:100:1:1")
    c.check(rc == 0, f"exit {rc}")
    stacks = folded("none")
    c.check(stacks is not None and total(stacks) == 0, f"samples outside the window: {stacks}")
    # A window covering the run, several specs in sequence, each clock.
    for name, spec in (("all", "realtime:0:100:1"), ("cpu", "process_cputime:0:100:0"),
                       ("seq", "realtime:0:0.001:1 cputime:0:100:1"), ("short", "0:100:1")):
        rc, out, err = sample(name, ["threads", "2"], XPTRACE_SAMPLE_PERIODS=spec)
        stacks = folded(name)
        c.check(rc == 0 and stacks is not None and inclusive(stacks, "heavy_work") > 0,
                f"'{spec}': no samples inside the window ({err})")
        c.check(messages(err) == [], f"'{spec}': message {err}")
    # Sampling stops after a window: 0.05 s of process CPU time only.
    rc, out, err = sample("late", ["threads", "4"], XPTRACE_SAMPLE_FREQ=200,
                          XPTRACE_SAMPLE_PERIODS="process_cputime:0:0.05:1")
    stacks = folded("late")
    cpu = cpu_seconds(out) or 1
    if c.check(stacks is not None, "late: no output"):
        c.check(total(stacks) < 0.5 * 200 * cpu, f"late: {total(stacks)} samples for a 0.05 s window")

elif mode == "env":
    bad = {"XPTRACE_SAMPLE_FREQ": "fast", "XPTRACE_SAMPLE_CLOCK": "sundial",
           "XPTRACE_SAMPLE_DEPTH": "0", "XPTRACE_SAMPLE_PERIODS": "realtime:1:x:1",
           "XPTRACE_SAMPLE_REALTIME_FREQ": "-5", "XPTRACE_SAMPLE_CPUTIME_FREQ": "1e3"}
    rc, out, err = sample("bad", ["threads", "1"], **bad)
    c.check(rc == 0, f"exit {rc}")
    lines = messages(err)
    for name, value in bad.items():
        hits = [line for line in lines if name in line]
        c.check(len(hits) == 1, f"{name}={value}: {len(hits)} message line(s): {lines}")
    c.check(any("'realtime:1:x:1'" in line for line in lines), f"periods message: {lines}")
    # Defaults used: cputime at 100 Hz, whole run.
    stacks = folded("bad")
    c.check(stacks is not None and inclusive(stacks, "heavy_work") > 0, "no samples with defaults")
    rec = xsamp.recordings(os.path.join(scratch, "bad"))
    c.check(rec and rec[0].freq == (100.0, 100.0), "defaults not recorded")
    # Good values are taken without a word.
    rc, out, err = sample("good", ["threads", "1"], XPTRACE_SAMPLE_FREQ="50.5",
                          XPTRACE_SAMPLE_CLOCK="realtime", XPTRACE_SAMPLE_DEPTH="512")
    c.check(messages(err) == [], f"good values: {err}")
    rec = xsamp.recordings(os.path.join(scratch, "good"))
    c.check(rec and rec[0].freq[1] == 50.5 and rec[0].depth == 512, "good values not recorded")
    rt = folded("good", 1)
    c.check(rt and inclusive(rt, "heavy_work") > 0, "realtime-only: no realtime samples")

elif mode == "fork":
    rc, out, err = sample("f", ["fork", "2"])
    c.check(rc == 0, f"exit {rc}: {err}")
    parent = folded("f")
    children = [d for d in os.listdir(os.path.join(scratch, "f")) if d.startswith("child-")]
    c.check(len(children) == 1, f"child folders: {children}")
    if parent is not None:
        c.check(inclusive(parent, "heavy_work", "[main]") > 0, "parent: no main-thread samples")
        c.check(threads(parent) == ["[main]"], f"parent has the child's threads: {threads(parent)}")
    else:
        c.check(False, "parent: no samples.folded")
    if children:
        child = folded(os.path.join("f", children[0]))
        if c.check(child is not None, "child: no samples.folded"):
            c.check("[thread-1]" in threads(child) and "[thread-2]" in threads(child),
                    f"child threads: {threads(child)}")

elif mode == "sigprof":
    for prog_mode in ("sigprof", "signal"):
        for clock in ("cputime", "both"):
            name = f"{prog_mode}-{clock}"
            rc, out, err = sample(name, [prog_mode, "2"], XPTRACE_SAMPLE_CLOCK=clock)
            c.check(rc == 0, f"{name}: the program's own SIGPROF handler broke: exit {rc}: {err}")
            c.check("prof_ticks=" in out, f"{name}: {out}")
            lines = messages(err)
            c.check(len(lines) == 1 and "SIGPROF" in lines[0] and "cputime sampling disabled" in lines[0],
                    f"{name}: message lines {lines}")
            if clock == "both":
                rt = folded(name, 1)
                c.check(rt is not None and inclusive(rt, "heavy_work") > 0,
                        f"{name}: the realtime sampler stopped too")

elif mode == "exit":
    rc, out, err = sample("x", ["exit", "1"])
    c.check(rc == 0, f"exit {rc}")
    stacks = folded("x")
    c.check(stacks is not None and inclusive(stacks, "heavy_work", "[thread-1]") > 0,
            f"exit() from a thread: {stacks}")

elif mode == "term":
    rc, out, err = sample("term", ["term", "2"])
    # No handler of ours: the program dies by the signal as it would,
    # and what it recorded before stays in the file.
    c.check(rc == -15, f"expected death by SIGTERM, got {rc}")
    stacks = folded("term")
    c.check(stacks is not None and inclusive(stacks, "heavy_work", "[main]") > 0, f"samples lost: {stacks}")

elif mode == "depth":
    rc, out, err = sample("d", ["threads", "1"], XPTRACE_SAMPLE_DEPTH=2)
    stacks = folded("d")
    if c.check(stacks is not None and total(stacks) > 0, "depth 2: no samples"):
        for frames, _ in stacks:
            real = [f for f in frames[1:] if f != "[truncated]"]
            c.check(len(real) <= 2, f"depth 2: {frames}")
        c.check(any("[truncated]" in f for f, _ in stacks), "no [truncated] marker")

else:
    c.check(False, f"unknown mode {mode}")

if not c.failures:
    shutil.rmtree(scratch, ignore_errors=True)  # recordings reserve disk blocks
sys.exit(c.done())
