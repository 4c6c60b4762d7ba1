"""Off-CPU time of `xptrace sample --off-cpu` (perf method) beyond the
folded profile (test_shapes.py checks that one's shares).

usage: test_offcpu.py MODE XPTRACE SHAPE_WORK TESTS_DIR SCRATCH
MODE: trace   the off-CPU slices of samples.perfetto-trace, on
              `shape_work offcpu 10` (thread "waiter": 10 cycles of 10 ms
              computing, 20 ms in nanosleep, 10 ms waiting for a mutex
              "holder" holds; the program prints its threads' tids and
              what each part took): on the right thread's track, named
              after the blocking function, never overlapping, no CPU sample
              of the thread inside one, the nanosleep slices adding up to
              the time the thread measured around its nanosleep calls
              (5 % or 2 ms), and `xptrace report` the same with the slices
              taken out of the trace (they are not traced calls)
      emfile  `xptrace sample -p PID --off-cpu` under a low open-file
              limit (setrlimit in the child) on `shape_work many 30`: the
              line "N of 31 attached thread(s) followed off CPU ... ulimit -n"
              with 31 the threads the program says it has and 0 < N < 31,
              N (or N - 1: one thread may get events on some CPUs only)
              threads in the off-CPU profile, exit status 0 and the CPU
              samples written and unwound
Exit 77 (skipped) where perf_event_open or kernel sampling is refused."""
import os
import re
import resource
import shutil
import subprocess
import sys

mode, xptrace, work, tests, scratch = sys.argv[1:6]
sys.path.insert(0, os.path.join(tests, "sampler"))
sys.path.insert(0, os.path.join(tests, "perfetto"))
from samples import Checker, attach_and_release, run, read_folded, total  # noqa: E402
from check_trace import parse_text, one  # noqa: E402

shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
c = Checker(mode)
PROTO = os.path.join(tests, "perfetto", "perfetto_min.proto")
CATEGORY = "xptrace.offcpu"


def xp(*args, env=None):
    return run([xptrace] + list(args), cwd=scratch, timeout=170, env=env)


def skip_if_refused(err):
    for why in ("using the timer method", "no off-CPU profile", "sampling a running process needs per-CPU"):
        if why in err:
            print(f"SKIP [{mode}]: {err.strip().splitlines()[-1]}")
            sys.exit(77)


def decode(path):
    out = subprocess.run(["protoc", "--decode=perfetto.protos.Trace", "-I", os.path.dirname(PROTO), PROTO],
                         stdin=open(path, "rb"), capture_output=True)
    c.check(out.returncode == 0, f"protoc: {out.stderr.decode(errors='replace')}")
    return parse_text(out.stdout.decode("utf-8", "replace")).get("packet", [])


def varint(b, i):
    v = s = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return v, i


def fields(b):
    """(field, raw bytes, body or None) of a protobuf message."""
    i = 0
    while i < len(b):
        key, j = varint(b, i)
        wire = key & 7
        body = None
        if wire == 0:
            _, j = varint(b, j)
        elif wire == 2:
            n, j = varint(b, j)
            body, j = b[j:j + n], j + n
        elif wire in (1, 5):
            j += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire}")
        yield key >> 3, b[i:j], body
        i = j


def without_track_events(src, dst):
    """The trace less its TrackEvent packets (TracePacket.track_event = 11)."""
    data = open(src, "rb").read()
    kept = [raw for f, raw, body in fields(data) if not (f == 1 and any(g == 11 for g, _, _ in fields(body)))]
    open(dst, "wb").write(b"".join(kept))


if mode == "trace":
    if not shutil.which("protoc"):
        print(f"SKIP [{mode}]: protoc not installed (it decodes the trace)")
        sys.exit(77)
    rc, out, err = xp("sample", "-f", "1000", "--off-cpu", "-o", "o", "--", work, "offcpu", "10")
    skip_if_refused(err)
    c.check(rc == 0, f"exit {rc}: {err}")
    m = re.search(r"wall waiter=([0-9.]+) compute=([0-9.]+) sleep=([0-9.]+) lock=([0-9.]+)", out)
    t = re.search(r"tid waiter=(\d+) holder=(\d+)", out)
    if not m or not t:
        c.check(False, f"the program printed no times or tids: {out}")
        sys.exit(c.done())
    t_sleep_ns = float(m.group(3)) * 1e9
    waiter_tid, holder_tid = int(t.group(1)), int(t.group(2))
    trace = os.path.join(scratch, "o", "samples.perfetto-trace")
    # Structure first: descriptors before use, slices nested on each track.
    p = subprocess.run([sys.executable, os.path.join(tests, "perfetto", "check_trace.py"), "proto", PROTO, trace],
                       capture_output=True, text=True)
    print(p.stdout.strip())
    c.check(p.returncode == 0, f"check_trace: {p.stdout} {p.stderr}")
    threads = {}  # track uuid -> (pid, tid, name)
    begins, samples = [], {}  # (track, ts, name, annotations); tid -> [ts]
    ends = {}
    for pk in decode(trace):
        td = one(pk, "track_descriptor")
        if td and one(td, "thread"):
            th = one(td, "thread")
            threads[one(td, "uuid")] = (one(th, "pid"), one(th, "tid"), one(th, "thread_name"))
        ps = one(pk, "perf_sample")
        if ps:
            samples.setdefault(one(ps, "tid"), []).append(one(pk, "timestamp"))
        te = one(pk, "track_event")
        if not te:
            continue
        c.check(te.get("categories") == [CATEGORY], f"a track event not of category {CATEGORY}: {te}")
        c.check(one(pk, "timestamp_clock_id") == 3, f"a slice not on MONOTONIC: {pk}")
        track = one(te, "track_uuid")
        if one(te, "type") == "TYPE_SLICE_BEGIN":
            anns = {one(a, "name"): one(a, "string_value", one(a, "uint_value")) for a in te.get("debug_annotations", [])}
            begins.append((track, one(pk, "timestamp"), one(te, "name"), anns))
        else:
            ends.setdefault(track, []).append(one(pk, "timestamp"))
    # Each track's begins and ends in order: one slice each (check_trace
    # checked they pair up).
    slices = {}  # track -> [(begin, end, name, stack lines)]
    k = {}
    for track, ts, name, anns in begins:
        i = k.get(track, 0)
        k[track] = i + 1
        end = ends.get(track, [])[i] if i < len(ends.get(track, [])) else ts
        slices.setdefault(track, []).append((ts, end, name, (anns.get("stack") or "").split("\n"), anns.get("blocked_us")))
    n_slices = sum(len(v) for v in slices.values())
    print(f"{n_slices} off-CPU slices on {len(slices)} thread tracks")
    c.check(n_slices > 0, "no off-CPU slice in the trace")
    for track, sl in slices.items():
        c.check(track in threads, f"slices on track {track}, not a thread's")
        pid, tid, tname = threads.get(track, (0, 0, ""))
        c.check(track == (pid << 32) | tid, f"track {track} is not thread {pid}/{tid}'s uuid")
        sl.sort()
        for (b0, e0, _, _, _), (b1, _, _, _, _) in zip(sl, sl[1:]):
            c.check(e0 <= b1, f"slices overlap on {tname}: [{b0}, {e0}] and one at {b1}")
        for b, e, name, stack, us in sl:
            c.check(e > b and us == (e - b + 500) // 1000, f"{name}: [{b}, {e}] blocked_us {us}")
            # Named after the innermost frame (the stack is innermost first).
            c.check(name == "off-CPU: " + (stack[0] or "[unknown]"), f"{name} for a stack starting {stack[:2]}")
            # A stack through a thread's own function is on that thread's
            # track (each runs on one thread only).
            for fn, owner in (("waiter", waiter_tid), ("holder", holder_tid), ("run_offcpu", pid)):
                c.check(fn not in stack or tid == owner, f"{name} on {tname} ({tid}), its stack through {fn} "
                        f"(thread {owner}): {stack}")
        # No CPU sample of the thread while it was blocked (same clock).
        inside = [s for s in samples.get(tid, []) if any(b + 1000 < s < e - 1000 for b, e, *_ in sl)]
        c.check(not inside, f"{len(inside)} CPU samples of {tname} inside its off-CPU slices: {inside[:3]}")
    pid = next((p_ for p_, t_, _ in threads.values() if t_ == waiter_tid), 0)
    waiter = slices.get((pid << 32) | waiter_tid, [])
    slept = [(b, e, n) for b, e, n, st, _ in waiter if "sleep_part" in st]
    locked = [(b, e, n) for b, e, n, st, _ in waiter if "lock_part" in st]
    c.check(all("nanosleep" in n for _, _, n in slept), f"sleep slices not named after nanosleep: {slept[:3]}")
    c.check(all("lock" in n or "futex" in n for _, _, n in locked), f"mutex slices: {locked[:3]}")
    got = sum(e - b for b, e, _ in slept)
    tol = max(0.05 * t_sleep_ns, 2e6)
    print(f"waiter: {len(slept)} nanosleep slices, {got / 1e6:.2f} ms; it timed {t_sleep_ns / 1e6:.2f} ms "
          f"around nanosleep (+- {tol / 1e6:.2f} ms); {len(locked)} mutex slices")
    c.check(abs(got - t_sleep_ns) <= tol, f"nanosleep slices {got / 1e6:.2f} ms for {t_sleep_ns / 1e6:.2f} ms")
    # (a cycle whose computing ended late under load sleeps not at all)
    c.check(len(slept) >= 1, "no nanosleep slice on the waiter's track")
    # The slices are the off-CPU profile's intervals: the same total, but
    # for each interval's rounding to 1 us.
    folded = read_folded(os.path.join(scratch, "o", "samples_offcpu.folded")) or []
    fsum = sum(k_ for f, k_ in folded if f[0].endswith(":waiter]") and "sleep_part" in f)
    c.check(abs(got / 1e3 - fsum) <= len(slept) + 1, f"sleep slices {got / 1e3:.0f} us, folded {fsum} us")
    # report: the same with the slices taken out of the trace (the off-CPU
    # column comes from samples_offcpu.folded, beside the trace).
    bare = os.path.join(scratch, "bare")
    os.makedirs(bare)
    for f in ("samples.folded", "samples_offcpu.folded"):
        shutil.copy(os.path.join(scratch, "o", f), bare)
    without_track_events(trace, os.path.join(bare, "samples.perfetto-trace"))
    c.check(os.path.getsize(os.path.join(bare, "samples.perfetto-trace")) < os.path.getsize(trace),
            "no track event packet taken out")
    reports = []
    for d in ("o", "bare"):
        rc, rout, rerr = xp("report", d)
        c.check(rc == 0, f"report {d}: {rc} {rerr}")
        reports.append(rout.split("\n", 1)[-1])  # its first line names the folder
    c.check(reports[0] == reports[1] and "Trace points" not in reports[0],
            f"report changed by the off-CPU slices:\n{reports[0]}\n---\n{reports[1]}")
    for d in ("o", "bare"):
        rc, _, rerr = xp("report", d, "--format", "pprof", "-o", d + ".pb.gz")
        c.check(rc == 0, f"report {d} --format pprof: {rc} {rerr}")
    pb = [open(os.path.join(scratch, d + ".pb.gz"), "rb").read() for d in ("o", "bare")]
    c.check(pb[0] == pb[1], "report --format pprof changed by the off-CPU slices")
elif mode == "emfile":
    n_threads = 30
    prog = subprocess.Popen([work, "many", str(n_threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    c.check(prog.stdout.readline().strip() == "ready", "shape_work many did not start")
    # Room for a few threads' events: each takes one descriptor per CPU,
    # after the CPU samples' (one per CPU), xptrace's own and the 32 it
    # keeps free; well under the 31 threads' ncpu * 31 on any machine.
    ncpu = os.sysconf("SC_NPROCESSORS_CONF")
    limit = 3 + 32 + 8 + 2 * ncpu + 12 * ncpu  # 71 on 2 CPUs: 16 of 31 followed

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    rc, out, err = attach_and_release([xptrace, "sample", "-f", "1000", "--off-cpu", "-p", str(prog.pid), "-o", "m"],
                                      prog, scratch, preexec_fn=low_limit)
    print(f"ulimit -n {limit} ({ncpu} CPUs): exit {rc}\n{err}")
    skip_if_refused(err)
    m = re.search(r"threads (\d+)\ncpu many=([0-9.]+)", out)
    c.check(prog.returncode == 0 and bool(m), f"shape_work many: exit {prog.returncode}: {out}")
    has, cpu = (int(m.group(1)), float(m.group(2))) if m else (n_threads + 1, 0.3)
    f = re.search(r"(\d+) of (\d+) attached thread\(s\) followed off CPU; some context-switch events could not be "
                  r"opened \(perf_event_open: Too many open files\): raise the open-file limit \(ulimit -n\)", err)
    c.check(bool(f), f"no 'N of M followed' line with the ulimit -n hint: {err}")
    followed, seen = (int(f.group(1)), int(f.group(2))) if f else (0, 0)
    c.check(seen == has, f"{seen} threads seen, the program has {has}")
    c.check(0 < followed < has, f"{followed} of {has} followed at ulimit -n {limit}")
    c.check(rc == 0, f"exit status {rc}, documented 0 (the outputs written)")
    c.check(f"context switches of {followed} attached thread" in err, f"method line: {err}")
    # Every followed thread blocks after the attach (main in pthread_join,
    # the others in many_sleep): in the off-CPU profile.
    off = read_folded(os.path.join(scratch, "m", "samples_offcpu.folded")) or []
    off_threads = {fr[0] for fr, _ in off}
    print(f"{followed} of {seen} followed; {len(off_threads)} threads in the off-CPU profile")
    c.check(followed - 1 <= len(off_threads) <= followed, f"{len(off_threads)} threads off CPU, {followed} followed")
    # The CPU samples all there and unwound: the descriptors xptrace needs
    # after the events were left to it.
    st = read_folded(os.path.join(scratch, "m", "samples.folded")) or []
    n, spin = total(st), sum(k_ for fr, k_ in st if fr[-1] == "many_spin")
    unwound = sum(k_ for fr, k_ in st if fr[-1] == "many_spin" and "many_thread" in fr)
    print(f"{n} samples for {cpu:.3f} CPU-s; many_spin {spin}, {unwound} of them under many_thread")
    c.check(n >= 0.5 * cpu * 1000, f"{n} samples for {cpu:.3f} CPU-s at 1 kHz")
    c.check(spin >= 0.8 * n and unwound >= 0.95 * spin, f"many_spin {spin} of {n}, {unwound} unwound")
    c.check(os.path.exists(os.path.join(scratch, "m", "samples.perfetto-trace")), "no samples.perfetto-trace")
else:
    c.check(False, f"unknown mode {mode}")
sys.exit(c.done())
