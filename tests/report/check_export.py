#!/usr/bin/env python3
"""Tests of `xptrace report`'s exports, read back by other tools.

  check_export.py XPTRACE SRC_DIR OUT_DIR CASE [PROGRAM]

Fixtures are generated here as text and encoded with `protoc` through
report_fixture.proto, with answers known by construction:
  shares  one thread, 100 samples: main;work;spin_40 x40, main;work;spin_30
          x30, main;spin_20 x20, main;spin_10 x10 (spin_10 in libfix.so)
  calls   nested slices of one thread (times in us):
            main [0,100]: a x3 (20 each, two b of 5 inside each),
                          c [70,90] (one b [75,80] inside)
          so: main 1 call, total 100, self 20; main;a 3, 60, 30;
          main;a;b 6, 30, 30; main;c 1, 20, 15; main;c;b 1, 5, 5.
Cases:
  pprof_shares  go tool pprof -top shows 40/30/20/10 % flat, 70 % cum for
                work, 100 % for main; -traces shows the four stacks; the
                sample total is 100 x 10 ms (the default --freq 100)
  pprof_calls   -top: flat (self) a 30us, b 35us, main 20us, c 15us; cum
                main 100us, a 60us; -sample_index=calls: b 7, a 3
  pprof_real    PROGRAM (tests/sampler/sampler_work.c) under `xptrace
                sample`: pprof's flat counts equal samples.folded's, to
                the sample, in ms at the rate the trace says (no --freq); the spin_* frames carry sampler_work.c and a
                line; the shares are 40/30/20/10 within 6 points
  pprof_usage   no samples and no slices, a binary on a terminal, --diff
  svg_shares    report --format svg of "shares" and "calls": every frame of
                the SVG (depth, name, value, x, width) is the one the stacks
                give (children left to right by name, width = value / total
                x 1200 px), nothing else
  svg_real      PROGRAM under `xptrace sample`: samples.svg is written beside
                samples.folded and named on stderr; its frames are those of
                samples.folded's counts
  svg_browser   headless Chromium opens the SVG and runs its script:
                ?s=spin_[34] reports "Matched: 70.00%", ?z=work zooms work
                to the full width (spin_40 to 40/70 of it), hides spin_20
                and keeps main, below it, full width
  tree_calls    --tree of "calls": the call tree with the calls, total and
                self time above, children by total time; --depth 2; CSV
  graph         --graph b: its two call paths (main > a > b: 6 calls, 30us;
                main > c > b: 1, 5us) and its callees (b alone: 7 calls,
                35us); --graph a: a's callees (a 3, 60us; b 6, 30us); an
                unknown function is one line, exit 1
  diff_shares   --diff of "shares" (100 samples) and the same shape twice as
                long (200): every change +0.00 and within the noise; of 400 and
                1000 samples with spin_40 50 % and spin_20 10 % in the second:
                spin_40 +10.00 and spin_20 -10.00 points beyond their noise
                (2 standard errors: 5.83 and 4.43 points), spin_30 +0.00 within it
  tree_real     PROGRAM (tests/functions' fn_work, -finstrument-functions)
                `calls` under `xptrace run --functions`: --tree counts each
                function's calls as the program makes them (leaf 1000 under
                main > loop_leaf, recurse 6 deep, one call each, rare 5, ...);
                --graph leaf: the one call path with 1000 calls
Exit 77 (skipped) with one line when go (Debian's golang-go) or Chromium
is missing."""
import os
import re
import xml.etree.ElementTree as ET
import shutil
import subprocess
import sys

XPTRACE, SRC, OUT, CASE = sys.argv[1:5]
PROGRAM = sys.argv[5] if len(sys.argv) > 5 else None


def fail(msg):
    print("check_export: FAIL: " + msg)
    sys.exit(1)


def encode(text, dest):
    r = subprocess.run(["protoc", "--encode=xptrace_fixture.Trace", "-I", SRC,
                        os.path.join(SRC, "report_fixture.proto")],
                       input=text.encode(), stdout=subprocess.PIPE)
    if r.returncode != 0:
        fail("protoc could not encode " + dest)
    with open(dest, "wb") as f:
        f.write(r.stdout)


def pkt(ts, body, seq=1):
    return ("packet { timestamp: %d timestamp_clock_id: 3 trusted_packet_sequence_id: %d %s }\n"
            % (ts, seq, body))


HEAD = ('packet { trusted_packet_sequence_id: 1 track_descriptor { uuid: 1000 '
        'process { pid: 100 process_name: "fix" } } }\n'
        'packet { trusted_packet_sequence_id: 1 track_descriptor { uuid: 1001 parent_uuid: 1000 '
        'thread { pid: 100 tid: 100 thread_name: "fix" } } }\n')


def shares_fixture(counts=(40, 30, 20, 10)):
    names = ["main", "work", "spin_40", "spin_30", "spin_20", "spin_10"]
    text = HEAD + "packet { trusted_packet_sequence_id: 1 sequence_flags: 1 interned_data {\n"
    for i, n in enumerate(names):
        text += '  function_names { iid: %d str: "%s" }\n' % (i + 1, n)
    text += ('  mapping_paths { iid: 1 str: "opt" } mapping_paths { iid: 2 str: "libfix.so" }\n'
             '  mappings { iid: 1 path_string_ids: 1 path_string_ids: 2 }\n')
    for i in range(len(names)):
        text += "  frames { iid: %d function_name_id: %d%s }\n" % (
            i + 1, i + 1, " mapping_id: 1 rel_pc: 4096" if names[i] == "spin_10" else "")
    stacks = [[1, 2, 3], [1, 2, 4], [1, 5], [1, 6]]  # outermost first
    for i, st in enumerate(stacks):
        text += "  callstacks { iid: %d %s }\n" % (
            i + 1, " ".join("frame_ids: %d" % f for f in st))
    text += "} }\n"
    ts = 1000
    for stack, count in zip(range(1, 5), counts):
        for _ in range(count):
            ts += 10000000
            text += pkt(ts, "perf_sample { pid: 100 tid: 100 callstack_iid: %d }" % stack)
    return text


def calls_fixture():
    ev = []  # (us, 'B'/'E', name)

    def call(name, t0, t1, inner=()):
        ev.append((t0, "B", name))
        for a, b, n, sub in inner:
            call(n, a, b, sub)
        ev.append((t1, "E", name))
    a_calls = [(1 + 20 * k, 21 + 20 * k, "a",
                [(3 + 20 * k, 8 + 20 * k, "b", ()), (10 + 20 * k, 15 + 20 * k, "b", ())])
               for k in range(3)]
    call("main", 0, 100, a_calls + [(70, 90, "c", [(75, 80, "b", ())])])
    text = HEAD
    for t, kind, name in ev:
        if kind == "B":
            body = ('track_event { type: 1 track_uuid: 1001 name: "%s" categories: "functions" }'
                    % name)
        else:
            body = "track_event { type: 2 track_uuid: 1001 }"
        text += pkt(1000000 + t * 1000, body)
    return text


def run(cmd, status=0, **kw):
    r = subprocess.run(cmd, cwd=OUT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if r.returncode != status:
        fail("%s: exit %d, not %d; stderr: %s" % (" ".join(cmd), r.returncode, status,
                                                   r.stderr.decode()))
    return r.stdout.decode(), r.stderr.decode()


def pprof(args):
    env = dict(os.environ, HOME=OUT, PPROF_TMPDIR=OUT)
    out, _ = run(["go", "tool", "pprof", "-symbolize=none"] + args, env=env)
    return out


def top_rows(text):
    """-top rows: {function: (flat, flat%, cum, cum%)} as strings."""
    rows = {}
    for line in text.splitlines():
        f = line.split(None, 5)
        if len(f) == 6 and f[1].endswith("%") and f[4].endswith("%"):
            rows[f[5].strip()] = (f[0], float(f[1][:-1]), f[3], float(f[4][:-1]))
    return rows


def trace_stacks(traces):
    """-traces: [(value, (innermost, ..., outermost))], labels left out."""
    stacks = []
    for block in traces.split("-----------+")[1:]:
        lines = [ln.split() for ln in block.splitlines()[1:] if ln.strip()]
        lines = [ln for ln in lines if ln and not ln[0].endswith(":")]
        if lines:
            stacks.append((lines[0][0], tuple(ln[-1] for ln in lines)))
    return stacks


def export(trace, name, extra=()):
    dest = os.path.join(OUT, name)
    if os.path.exists(dest):
        os.unlink(dest)
    _, err = run([XPTRACE, "report", "--format", "pprof", "-o", name] + list(extra) + [trace])
    if name not in err or "go tool pprof" not in err:
        fail("the profile's path and the command to read it are not named: " + err)
    with open(dest, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            fail(name + " is not gzipped")
    return name


def case_pprof_shares():
    encode(shares_fixture(), os.path.join(OUT, "shares.perfetto-trace"))
    prof = export("shares.perfetto-trace", "shares.pb.gz")
    top = pprof(["-top", prof])
    rows = top_rows(top)
    want = {"spin_40": 40, "spin_30": 30, "spin_20": 20, "spin_10": 10}
    for fn, share in want.items():
        if fn not in rows or abs(rows[fn][1] - share) > 0.01 or abs(rows[fn][3] - share) > 0.01:
            fail("%s: flat/cum %% not %d: %s\n%s" % (fn, share, rows.get(fn), top))
    if rows.get("work", (0, 0, 0, 0))[1:4:2] != (0.0, 70.0) or rows["main"][3] != 100.0:
        fail("work should be 0 %% flat, 70 %% cum, main 100 %% cum:\n" + top)
    if "Total samples = 1s" not in top and "Total samples = 1000ms" not in top:
        fail("100 samples at the default 100 Hz are 1 s of CPU:\n" + top)
    traces = pprof(["-traces", prof])
    stacks = trace_stacks(traces)
    want_stacks = {("400ms", ("spin_40", "work", "main")), ("300ms", ("spin_30", "work", "main")),
                   ("200ms", ("spin_20", "main")), ("100ms", ("spin_10", "main"))}
    if set(stacks) != want_stacks:
        fail("-traces: %s, not %s\n%s" % (sorted(stacks), sorted(want_stacks), traces))
    raw = pprof(["-raw", prof])
    if not re.search(r"/opt/libfix.so", raw):
        fail("the mapping of spin_10 (/opt/libfix.so) is missing:\n" + raw)
    # a faster run: --freq scales the CPU time, not the shares
    prof = export("shares.perfetto-trace", "shares1k.pb.gz", ["--freq", "1000"])
    top = pprof(["-top", prof])
    if "Total samples = 100ms" not in top or top_rows(top)["spin_40"][1] != 40.0:
        fail("--freq 1000: 100 samples are 100 ms:\n" + top)


def case_pprof_calls():
    encode(calls_fixture(), os.path.join(OUT, "calls.perfetto-trace"))
    prof = export("calls.perfetto-trace", "calls.pb.gz")
    top = pprof(["-top", "-unit=us", prof])
    rows = top_rows(top)
    want = {"a": ("30us", "60us"), "b": ("35us", "35us"), "main": ("20us", "100us"),
            "c": ("15us", "20us")}
    for fn, (flat, cum) in want.items():
        if fn not in rows or (rows[fn][0], rows[fn][2]) != (flat, cum):
            fail("%s: flat, cum %s, not %s\n%s" % (fn, rows.get(fn), (flat, cum), top))
    top = pprof(["-top", "-sample_index=calls", prof])
    rows = top_rows(top)
    for fn, calls in {"b": "7", "a": "3", "main": "1", "c": "1"}.items():
        if fn not in rows or rows[fn][0] != calls:
            fail("%s: %s calls, not %s\n%s" % (fn, rows.get(fn), calls, top))
    traces = pprof(["-traces", prof])
    want = [("20us", ("main",)), ("30us", ("a", "main")), ("30us", ("b", "a", "main")),
            ("15us", ("c", "main")), ("5us", ("b", "c", "main"))]
    if sorted(trace_stacks(traces)) != sorted(want):
        fail("-traces: the five call paths with their self time expected\n" + traces)


def folded_counts(path):
    self_counts = {}
    for line in open(path):
        stack, n = line.rsplit(" ", 1)
        leaf = stack.split(";")[-1]
        self_counts[leaf] = self_counts.get(leaf, 0) + int(n)
    return self_counts


def case_pprof_real():
    run_dir = os.path.join(OUT, "real")
    shutil.rmtree(run_dir, ignore_errors=True)
    out = run([XPTRACE, "sample", "-f", "500", "-o", run_dir, "--", PROGRAM, "split", "4"])[0]
    counts = folded_counts(os.path.join(run_dir, "samples.folded"))
    total = sum(counts.values())
    if total < 100:
        fail("too few samples to compare: %d" % total)
    prof = export("real", "real.pb.gz", ["--freq", "500"])
    top = pprof(["-top", "-unit=ms", "-nodefraction=0", "-nodecount=0", prof])
    rows = top_rows(top)
    # pprof may shorten C++ names (argument lists): compared where it
    # shows a name whole, and the total in any case
    for fn, n in counts.items():
        key = fn
        if any(c in key for c in " (<["):
            continue
        if key not in rows or rows[key][0] != "%gms" % (n * 2):
            fail("%s: %d samples in samples.folded, pprof says %s\n%s" %
                 (fn, n, rows.get(key), top))
    if "Total samples = %gms" % (total * 2) not in top:
        fail("pprof's total is not %d samples x 2 ms:\n%s" % (total, top))
    # The truth: each thread's CPU time as the program measured it (work
    # of 40/30/20/10 is not that time on a busy machine's shared cores).
    cpu = {k: float(v) for k, v in re.findall(r"(spin_\d+)=([0-9.]+)", out)}
    if len(cpu) != 4:
        fail("no per-thread CPU times from the program: %r" % out)
    for fn in ("spin_40", "spin_30", "spin_20", "spin_10"):
        share = 100.0 * cpu[fn] / sum(cpu.values())
        if abs(rows[fn][1] - share) > 6:
            fail("%s: %.1f %%, not %.1f %% (its CPU time) within 6 points\n%s" % (fn, rows[fn][1], share, top))
    # Without --freq: the rate the trace says (500 Hz), not a default of 100.
    plain = export("real", "real-rate.pb.gz")
    top2 = pprof(["-top", "-unit=ms", "-nodefraction=0", "-nodecount=0", plain])
    if "Total samples = %gms" % (total * 2) not in top2:
        fail("without --freq, the total is not %d samples x 2 ms (the trace's 500 Hz):\n%s" % (total, top2))
    listing = pprof(["-raw", prof])
    if not re.search(r"spin_40 \S*sampler_work\.c:\d+", listing):
        fail("spin_40 has no file and line:\n" + listing)
    notes = subprocess.run(["readelf", "-n", PROGRAM], stdout=subprocess.PIPE).stdout.decode()
    bid = re.search(r"Build ID: ([0-9a-f]+)", notes)
    if bid and not re.search(re.escape(PROGRAM) + r" " + bid.group(1), listing):
        fail("the mapping of %s lacks its build id %s:\n%s" % (PROGRAM, bid.group(1), listing))
    print("pprof_real: %d samples; shares %s" %
          (total, {k: rows[k][1] for k in ("spin_40", "spin_30", "spin_20", "spin_10")}))


def case_pprof_usage():
    encode(HEAD, os.path.join(OUT, "empty.perfetto-trace"))
    if os.path.exists(os.path.join(OUT, "e.pb.gz")):
        os.unlink(os.path.join(OUT, "e.pb.gz"))
    _, err = run([XPTRACE, "report", "--format", "pprof", "-o", "e.pb.gz",
                  "empty.perfetto-trace"], status=1)
    if err.count("\n") != 1 or "no samples" not in err or os.path.exists(
            os.path.join(OUT, "e.pb.gz")):
        fail("a trace with nothing to profile: one line, no file: " + err)
    encode(calls_fixture(), os.path.join(OUT, "calls.perfetto-trace"))
    _, err = run([XPTRACE, "report", "--format", "pprof", "--diff", "calls.perfetto-trace",
                  "calls.perfetto-trace"], status=2)
    if not err.startswith("xptrace: --format pprof"):
        fail("--diff with pprof: " + err)
    open(os.path.join(OUT, "exists.pb.gz"), "w").close()
    _, err = run([XPTRACE, "report", "--format", "pprof", "-o", "exists.pb.gz",
                  "calls.perfetto-trace"], status=1)
    if "exists.pb.gz" not in err or os.path.getsize(os.path.join(OUT, "exists.pb.gz")):
        fail("an existing file is not overwritten: " + err)


SVG = "{http://www.w3.org/2000/svg}"


def svg_frames(text):
    """{(depth, name, value, x, width)} of the SVG's frames."""
    root = ET.fromstring(text)
    out = set()
    for g in root.iter(SVG + "g"):
        if g.get("class") != "fr":
            continue
        r = g.find(SVG + "rect")
        out.add((int(g.get("data-d")), g.get("data-n"), int(g.get("data-v")),
                 round(float(r.get("x")), 2), round(float(r.get("width")), 2)))
    return out


def expected_frames(stacks):
    """The frames of [(frames root first, value)]: as drawn, 1200 px wide
    from x = 10, children left to right by name."""
    tree = {}
    total = 0
    for frames, v in stacks:
        total += v
        node = tree
        for f in frames:
            node = node.setdefault(f, [0, {}])
            node[0] += v
            node = node[1]
    out = {(0, "all", total, 10.0, 1200.0)}

    def walk(node, depth, x):
        for name in sorted(node, key=lambda n: n.encode()):
            v, kids = node[name]
            w = v * 1200.0 / total
            out.add((depth, name, v, round(x, 2), round(w, 2)))
            walk(kids, depth + 1, x)
            x += w
    walk(tree, 1, 10.0)
    return out


def same_frames(got, want, what):
    def close(a, b):
        return a[:3] == b[:3] and abs(a[3] - b[3]) < 0.02 and abs(a[4] - b[4]) < 0.02
    missing = [w for w in want if not any(close(g, w) for g in got)]
    extra = [g for g in got if not any(close(g, w) for w in want)]
    if missing or extra:
        fail("%s: frames missing %s, unexpected %s" % (what, sorted(missing), sorted(extra)))


SHARES_STACKS = [(["main", "work", "spin_40"], 40), (["main", "work", "spin_30"], 30),
                 (["main", "spin_20"], 20), (["main", "spin_10"], 10)]
CALLS_STACKS = [(["main"], 20000), (["main", "a"], 30000), (["main", "a", "b"], 30000),
                (["main", "c"], 15000), (["main", "c", "b"], 5000)]


def case_svg_shares():
    encode(shares_fixture(), os.path.join(OUT, "shares.perfetto-trace"))
    encode(calls_fixture(), os.path.join(OUT, "calls.perfetto-trace"))
    out, _ = run([XPTRACE, "report", "--format", "svg", "shares.perfetto-trace"])
    same_frames(svg_frames(out), expected_frames(SHARES_STACKS), "shares")
    out, _ = run([XPTRACE, "report", "--format", "svg", "calls.perfetto-trace"])
    same_frames(svg_frames(out), expected_frames(CALLS_STACKS), "calls")
    for name in ("shares.svg",):
        if os.path.exists(os.path.join(OUT, name)):
            os.unlink(os.path.join(OUT, name))
    _, err = run([XPTRACE, "report", "--format", "svg", "-o", "shares.svg",
                  "shares.perfetto-trace"])
    if "shares.svg" not in err:
        fail("the flame graph's file is not named: " + err)
    same_frames(svg_frames(open(os.path.join(OUT, "shares.svg")).read()),
                expected_frames(SHARES_STACKS), "shares -o")


def case_svg_real():
    run_dir = os.path.join(OUT, "svgreal")
    shutil.rmtree(run_dir, ignore_errors=True)
    _, err = run([XPTRACE, "sample", "-o", run_dir, "--", PROGRAM, "split", "2"])
    svg = os.path.join(run_dir, "samples.svg")
    if svg not in err or not os.path.exists(svg):
        fail("samples.svg not written beside samples.folded or not named: " + err)
    stacks = []
    for line in open(os.path.join(run_dir, "samples.folded")):
        stack, n = line.rsplit(" ", 1)
        stacks.append((stack.split(";"), int(n)))
    same_frames(svg_frames(open(svg).read()), expected_frames(stacks), "samples.svg")


def case_svg_browser():
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        print("check_export: SKIP: chromium is not installed (Debian's chromium opens the SVG)")
        sys.exit(77)
    encode(shares_fixture(), os.path.join(OUT, "shares.perfetto-trace"))
    out, _ = run([XPTRACE, "report", "--format", "svg", "shares.perfetto-trace"])
    path = os.path.join(os.path.abspath(OUT), "browser.svg")
    with open(path, "w") as f:
        f.write(out)

    def dom(query):
        r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                            "--user-data-dir=" + os.path.join(os.path.abspath(OUT), "chromium"),
                            "--dump-dom", "file://" + path + query],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=120)
        if r.returncode != 0 or "<svg" not in r.stdout.decode():
            fail("chromium could not open the SVG (exit %d)" % r.returncode)
        return r.stdout.decode()
    text = dom("?s=spin_%5B34%5D")
    if "Matched: 70.00%" not in text:
        fail("search spin_[34]: no 'Matched: 70.00%' in the page:\n" + text[-3000:])
    root = ET.fromstring(dom("?z=work"))
    frames = {}
    for g in root.iter(SVG + "g"):
        if g.get("class") == "fr":
            r = g.find(SVG + "rect")
            frames[g.get("data-n")] = (float(r.get("width")), g.get("style") or "")
    want = {"work": 1200.0, "spin_40": 1200.0 * 40 / 70, "spin_30": 1200.0 * 30 / 70,
            "main": 1200.0}
    for name, w in want.items():
        if abs(frames[name][0] - w) > 0.05 or "none" in frames[name][1]:
            fail("zoom on work: %s is %s, not %.2f px wide and shown" % (name, frames[name], w))
    if "display: none" not in frames["spin_20"][1]:
        fail("zoom on work: spin_20 still shown: %s" % (frames["spin_20"],))


def rows_of(text, header):
    """The rows under a text table's header line, split on 2+ spaces."""
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.split() == header.split())
    out = []
    for ln in lines[i + 1:]:
        if not ln.strip() or ln.startswith(("calls ", "b:", "a:")):
            break
        out.append(tuple(x.strip() for x in re.split(r"\s{2,}", ln.strip())))
    return out


def case_tree_calls():
    encode(calls_fixture(), os.path.join(OUT, "calls.perfetto-trace"))
    out, _ = run([XPTRACE, "report", "--tree", "calls.perfetto-trace"])
    got = rows_of(out, "total% total self% self calls function")
    want = [("100.00%", "100.00us", "20.00%", "20.00us", "1", "main"),
            ("60.00%", "60.00us", "30.00%", "30.00us", "3", "a"),
            ("30.00%", "30.00us", "30.00%", "30.00us", "6", "b"),
            ("20.00%", "20.00us", "15.00%", "15.00us", "1", "c"),
            ("5.00%", "5.00us", "5.00%", "5.00us", "1", "b")]
    if got != want:
        fail("--tree:\n%s\nnot\n%s" % (got, want))
    indent = [ln for ln in out.splitlines() if ln.endswith(" b")]
    if len(indent) != 2 or not all(ln.endswith("      b") for ln in indent):
        fail("--tree: b is not indented under its callers:\n" + out)
    if "calls 12, total 100.00us" not in out:
        fail("--tree: no 'calls 12, total 100.00us' line:\n" + out)
    out, _ = run([XPTRACE, "report", "--tree", "--depth", "2", "calls.perfetto-trace"])
    if [r[-1] for r in rows_of(out, "total% total self% self calls function")] != ["main", "a", "c"]:
        fail("--depth 2 keeps main, a, c:\n" + out)
    out, _ = run([XPTRACE, "report", "--tree", "--format", "csv", "calls.perfetto-trace"])
    want_csv = ["section,depth,function,calls,total,total%,self,self%",
                "calltree,0,main,1,100000,100.00,20000,20.00",
                "calltree,1,a,3,60000,60.00,30000,30.00",
                "calltree,2,b,6,30000,30.00,30000,30.00",
                "calltree,1,c,1,20000,20.00,15000,15.00",
                "calltree,2,b,1,5000,5.00,5000,5.00"]
    if out.split() != want_csv:
        fail("--tree CSV:\n" + out)


def case_diff_shares():
    encode(shares_fixture(), os.path.join(OUT, "d100.perfetto-trace"))
    encode(shares_fixture((80, 60, 40, 20)), os.path.join(OUT, "d200.perfetto-trace"))
    out, _ = run([XPTRACE, "report", "--format", "csv", "d100.perfetto-trace", "--diff",
                  "d200.perfetto-trace"])
    rows = [r.split(",") for r in out.split("\n\n")[0].splitlines()]
    if rows[0][:6] != ["section", "function", "self%_a", "self%_b", "change", "noise"]:
        fail("diff columns: %s" % rows[0])
    body = {r[1]: r for r in rows[1:]}
    for fn, share in {"spin_40": "40.00", "spin_30": "30.00", "spin_20": "20.00",
                      "spin_10": "10.00", "work": "0.00"}.items():
        r = body[fn]
        if r[2] != share or r[3] != share or r[4] != "0.00" or r[-1] != "noise":
            fail("same shape, twice as long: %s should be %s both, change 0, noise: %s" %
                 (fn, share, r))
    encode(shares_fixture((160, 120, 80, 40)), os.path.join(OUT, "d400.perfetto-trace"))
    encode(shares_fixture((500, 300, 100, 100)), os.path.join(OUT, "d1000.perfetto-trace"))
    out, _ = run([XPTRACE, "report", "d400.perfetto-trace", "--diff", "d1000.perfetto-trace"])
    text = out.split("Trace points")[0]
    want = {"spin_40": ("40.00%", "50.00%", "+10.00", "5.83%", None),
            "spin_20": ("20.00%", "10.00%", "-10.00", "4.43%", None),
            "spin_30": ("30.00%", "30.00%", "+0.00", "5.42%", "noise")}
    for fn, (a, b, change, noise, note) in want.items():
        line = next((ln.split() for ln in text.splitlines() if ln.startswith(fn + " ")), None)
        if not line or line[1:5] != [a, b, change, noise] or (line[-1] == "noise") != bool(note):
            fail("%s: %s, not %s %s %s %s %s\n%s" % (fn, line, a, b, change, noise, note, out))
    if not re.search(r"2 row\(s\) changed by more than their noise", text):
        fail("the note does not count the two rows that moved:\n" + text)


def case_tree_real():
    run_dir = os.path.join(OUT, "fnreal")
    shutil.rmtree(run_dir, ignore_errors=True)
    run([XPTRACE, "run", "--functions", "-o", run_dir, "--", PROGRAM, "calls"])
    out, _ = run([XPTRACE, "report", "--tree", "--format", "csv", "fnreal"])
    rows = [r.split(",") for r in out.split()[1:]]
    calls, paths = {}, {}
    stack = []
    for r in rows:
        depth, fn, n = int(r[1]), r[2], int(r[3])
        stack[depth:] = [fn]
        calls[fn] = calls.get(fn, 0) + n
        paths[" > ".join(stack)] = n
    # tests/functions/fn_work.c's "calls" (test_functions.py's CALLS)
    want = {"main": 1, "loop_leaf": 1, "leaf": 1000, "recurse": 6, "via_ptr": 3,
            "tail_from": 3, "rare": 5, "cold_note": 2}
    for fn, n in want.items():
        if calls.get(fn) != n:
            fail("--tree: %s called %s times, not %d:\n%s" % (fn, calls.get(fn), n, out))
    if paths.get("main > loop_leaf > leaf") != 1000:
        fail("--tree: leaf's 1000 calls are not under main > loop_leaf:\n" + out)
    deep = "main" + " > recurse" * 6
    if paths.get(deep) != 1:
        fail("--tree: recurse is not six calls deep:\n" + out)
    out, _ = run([XPTRACE, "report", "--graph", "leaf", "--format", "csv", "fnreal"])
    if "callers,main > loop_leaf > leaf,1000," not in out:
        fail("--graph leaf:\n" + out)


def case_graph():
    encode(calls_fixture(), os.path.join(OUT, "calls.perfetto-trace"))
    out, _ = run([XPTRACE, "report", "--graph", "b", "calls.perfetto-trace"])
    callers = rows_of(out, "call path calls total self")
    if callers != [("main > a > b", "6", "30.00us", "30.00us"),
                   ("main > c > b", "1", "5.00us", "5.00us")]:
        fail("--graph b, callers: %s\n%s" % (callers, out))
    callees = rows_of(out, "total% total self% self calls function")
    if callees != [("100.00%", "35.00us", "100.00%", "35.00us", "7", "b")]:
        fail("--graph b, callees: %s\n%s" % (callees, out))
    out, _ = run([XPTRACE, "report", "--graph", "a", "calls.perfetto-trace"])
    callees = rows_of(out, "total% total self% self calls function")
    if callees != [("100.00%", "60.00us", "50.00%", "30.00us", "3", "a"),
                   ("50.00%", "30.00us", "50.00%", "30.00us", "6", "b")]:
        fail("--graph a, callees: %s\n%s" % (callees, out))
    _, err = run([XPTRACE, "report", "--graph", "zz", "calls.perfetto-trace"], status=1)
    if err.count("\n") != 1 or "'zz'" not in err:
        fail("--graph of an unknown function: " + err)


os.makedirs(OUT, exist_ok=True)
if CASE.startswith("pprof") and CASE != "pprof_usage" and not shutil.which("go"):
    print("check_export: SKIP: go is not installed (Debian's golang-go reads pprof profiles)")
    sys.exit(77)
globals()["case_" + CASE]()
print("check_export: %s ok" % CASE)
