#!/usr/bin/env python3
"""One of our collectors, a program linked with our proxy, two dispatchers:
ours (libxptifw.so) and a copy exporting Intel's 48 entry points only.
Under the second the collector must load, say once that it lacks
xptrace's extensions, and trace the same as under ours; the full
dispatcher must never be loaded (ld.so's own log says which ran).

  run_intel48.py text DIR OURS INTEL48 COLLECTOR EXAMPLE
  run_intel48.py stats DIR OURS INTEL48 COLLECTOR SAMPLE CHECK_STATS [TEXT_COLLECTOR]
  run_intel48.py perfetto DIR OURS INTEL48 COLLECTOR WORKLOAD RUN_CASE PROTO CHECK_TRACE
"""
import csv
import glob
import os
import re
import shutil
import subprocess
import sys

DEGRADED = re.compile(r"^xpti: the dispatcher has no xptiRegisterStreamCallback \(not xptrace's\): "
                      r"xptrace's collectors do not see the user-defined types of tools registered "
                      r"after the first stream's start$")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(dirname, dispatcher, collector, argv, env_extra=None, check_loads=None):
    """Runs argv under dispatcher; returns (status, stderr lines)."""
    os.makedirs(dirname, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XPTI_", "XPTRACE_"))}
    env.update({"XPTI_TRACE_ENABLE": "1", "XPTI_FRAMEWORK_DISPATCHER": dispatcher,
                "XPTI_SUBSCRIBERS": collector})
    env.update(env_extra or {})
    if check_loads:
        for f in glob.glob(os.path.join(dirname, "ld.*")):
            os.unlink(f)
        env["LD_DEBUG"] = "files"
        env["LD_DEBUG_OUTPUT"] = os.path.join(dirname, "ld")
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    err = p.stderr.decode(errors="replace").splitlines()
    if check_loads:
        ours, intel48 = check_loads
        log = "".join(open(f, errors="replace").read()
                      for f in glob.glob(os.path.join(dirname, "ld.*")))
        inits = re.findall(r"calling init: (\S+)", log)
        if os.path.realpath(intel48) not in map(os.path.realpath, inits):
            fail("the Intel-48 dispatcher was not loaded: %s" % inits)
        if os.path.realpath(ours) in map(os.path.realpath, inits):
            fail("the full dispatcher %s was loaded too" % ours)
    return p.returncode, err, p.stdout.decode(errors="replace")


def expect_degraded(err):
    said = [l for l in err if l.startswith("xpti:")]
    if len(said) != 1 or not DEGRADED.match(said[0]):
        fail("expected one line saying the dispatcher lacks the extensions, got %s" % err)


# ---- text -------------------------------------------------------------------

TEXT_IDS = re.compile(r" (uid|parent|source|target)=\d+")
# Intel's API names no tool: another tool's types print as "tool<id>:".
TEXT_TOOL = re.compile(r" [^ :]+:user(\d+)_")


def text_lines(path):
    """Lines without time stamp and pid:tid, ids masked (threads create
    events in any order), metadata pairs sorted (Intel's map has no order)."""
    out = []
    for line in open(path):
        parts = line.rstrip("\n").split(" ", 2)
        if len(parts) < 3 or not re.match(r"^\d+$", parts[0]) or not re.match(
                r"^\d+:\d+$", parts[1]):
            fail("malformed line %r" % line)
        body = TEXT_TOOL.sub(r" TOOL:user\1_", TEXT_IDS.sub(r" \1=N", parts[2]))
        if " | " in body:
            head, meta = body.split(" | ", 1)
            body = head + " | " + " ".join(sorted(meta.split(" ")))
        out.append(body)
    return sorted(out)


def text(d, ours, intel48, collector, example):
    got = {}
    for name, disp in (("ours", ours), ("intel48", intel48)):
        path = os.path.join(d, name + ".txt")
        if os.path.exists(path):
            os.unlink(path)
        rc, err, stdout = run(os.path.join(d, name), disp, collector, [example],
                              {"XPTI_TEXT_OUTPUT": path},
                              (ours, intel48) if name == "intel48" else None)
        if rc != 0:
            fail("%s: example exited with %d: %s" % (name, rc, err))
        if "(tracing on)" not in stdout:
            fail("%s: example did not trace: %s" % (name, stdout))
        if name == "ours" and err:
            fail("ours: unexpected stderr %s" % err)
        if name == "intel48":
            expect_degraded(err)
        got[name] = text_lines(path)
        tools = set(re.findall(r" ([^ :]+):user0_begin ", open(path).read()))
        if tools != {"example" if name == "ours" else "tool1"}:
            fail("%s: tool names %s" % (name, tools))
    if len(got["ours"]) != 75:
        fail("ours: %d lines, expected 75" % len(got["ours"]))
    if got["ours"] != got["intel48"]:
        a, b = set(got["ours"]), set(got["intel48"])
        fail("traces differ: only ours %s; only intel48 %s" % (sorted(a - b)[:5],
                                                               sorted(b - a)[:5]))
    if not any(" | " in l for l in got["intel48"]):
        fail("no metadata under intel48")


# ---- stats ------------------------------------------------------------------


def stats_rows(path):
    with open(path, newline="") as f:
        return {(r["stream"], r["type"], r["name"]): (r["kind"], r["count"])
                for r in csv.DictReader(f)}


def stats(d, ours, intel48, collector, sample, check_stats, text_collector=None):
    rows = {}
    both = os.path.join(d, "both.txt")
    if os.path.exists(both):
        os.unlink(both)
    for name, disp in (("ours", ours), ("intel48", intel48)):
        out = os.path.join(d, name)
        shutil.rmtree(out, ignore_errors=True)
        subscribers, env = collector, {"XPTRACE_OUTPUT": out}
        if name == "intel48" and text_collector:
            # two collectors, one process: still one line
            subscribers = collector + "," + text_collector
            env["XPTI_TEXT_OUTPUT"] = both
        rc, err, _ = run(out + "-run", disp, subscribers, [sample], env,
                         (ours, intel48) if name == "intel48" else None)
        if rc != 0:
            fail("%s: stats_sample exited with %d: %s" % (name, rc, err))
        if name == "intel48":
            expect_degraded(err)
        rows[name] = stats_rows(os.path.join(out, "stats.csv"))
    if text_collector and not re.search(r"^\d+ \d+:\d+ sample task_begin ", open(both).read(), re.M):
        fail("the text collector beside the stats one printed no task_begin of stream sample")
    # Ours: every expected number.
    r = subprocess.run([sys.executable, check_stats, os.path.join(d, "ours")])
    if r.returncode != 0:
        fail("ours: check_stats.py")
    # Intel's API cannot subscribe to the types of a tool unknown at
    # initialisation (stats_sample's "late"): every other row, the same count.
    def other_tool(key):
        t = key[1]
        return ":" in t and not t.startswith("xptrace:")
    want = {k: v for k, v in rows["ours"].items() if not other_tool(k)}
    if len(want) == len(rows["ours"]):
        fail("ours has no row of another tool: the test lost its point")
    if rows["intel48"] != want:
        a, b = set(want.items()), set(rows["intel48"].items())
        fail("rows differ: only ours %s; only intel48 %s" % (sorted(a - b), sorted(b - a)))


# ---- perfetto -----------------------------------------------------------------

PT_CASES = [
    ("basic", ["basic"], ["--slices", "150", "--instants", "10", "--nodes", "4", "--flows", "2",
                          "--threads", "1", "--name", "compute=100",
                          "--name", "named_function=50", "--name", "ready=10",
                          "--name", "node_b=1", "--annotated", "2"]),
    ("device", ["device"], ["--slices", "10", "--device-slices", "10", "--device-lanes", "4",
                            "--lanes", "inorder_q=1", "--lanes", "overlap_q=3",
                            "--device-flows", "5", "--flows", "10", "--nodes", "10",
                            "--name", "renamed=1", "--name", "dev_x=2",
                            "--device-min-dur", "5000"]),
    ("threads", ["threads", "4", "2000"], ["--slices", "8000", "--threads", "4"]),
]


def perfetto(d, ours, intel48, collector, workload, run_case, proto, checker):
    for case, mode, opts in PT_CASES:
        for name, disp in (("ours", ours), ("intel48", intel48)):
            out = os.path.join(d, "%s-%s" % (case, name))
            env = ["XPTI_FRAMEWORK_DISPATCHER=" + disp]
            if name == "intel48":
                env.append("XPT_EXPECT_STDERR=xpti: the dispatcher has no "
                           "xptiRegisterStreamCallback")
            else:
                env.append("XPT_REJECT_STDERR=xpti:")
            r = subprocess.run(["env"] + [e for e in env if e.startswith("XPT_")] +
                               ["sh", run_case, workload, collector, proto, checker, out,
                                "proto", "0"] + mode + ["--", env[0], "--"] + opts)
            if r.returncode != 0:
                fail("%s under %s: run_case.sh / check_trace.py" % (case, name))
    # The Intel-48 dispatcher alone, once more under ld.so's eye.
    rc, err, _ = run(os.path.join(d, "loads"), intel48, collector, [workload, "basic"],
                     {"XPTRACE_OUTPUT": os.path.join(d, "loads", "out")}, (ours, intel48))
    if rc != 0:
        fail("loads: workload exited with %d: %s" % (rc, err))
    expect_degraded(err)


def main():
    mode, d = sys.argv[1], sys.argv[2]
    os.makedirs(d, exist_ok=True)
    {"text": text, "stats": stats, "perfetto": perfetto}[mode](d, *sys.argv[3:])
    print("ok")


if __name__ == "__main__":
    main()
