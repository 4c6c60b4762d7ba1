"""Tests of `xptrace sample` with the perf method (the default where
perf_event_open works), on fixtures of known shape and a Debian program.

usage: test_perf_sample.py MODE XPTRACE PERF_WORK PLUGIN CXX_WORK TESTS_DIR SCRATCH
Exit 77 (skipped) where perf_event_open is refused."""
import os
import random
import re
import shutil
import subprocess
import sys

mode, xptrace, work, plugin, cxx, tests, scratch = sys.argv[1:8]
sys.path.insert(0, os.path.join(tests, "sampler"))
from samples import Checker, run, read_folded, read_csv, total, user_frames  # noqa: E402

shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
c = Checker("perf-" + mode)


def xp(*args, env=None):
    return run([xptrace] + list(args), env=env, cwd=scratch, timeout=170)


rc, out, err = xp("sample", "--method", "perf", "-o", "probe", "--", "true")
if "using the timer method" in err:
    print(f"SKIP [perf-{mode}]: {err.strip()}")
    sys.exit(77)


def sample(name, *cmd, opts=(), env=None):
    rc, out, err = xp("sample", "-f", "1000", *opts, "-o", name, "--", *cmd, env=env)
    stacks = read_folded(os.path.join(scratch, name, "samples.folded")) or []
    # Samples in the dynamic loader's start-up (before main exists: one in a
    # few hundred runs; _dl_start_user runs the libraries' initialisers, 1 of
    # 96 under TSan) are right but not the shape under test.
    stacks = [(f, k) for f, k in stacks if not any(x.startswith("_dl_start") for x in f)]
    # Kernel frames (sampled as root) are checked by the kernel mode only
    # (and count toward --depth).
    return rc, out, err, stacks if mode in ("kernel", "kcache", "depth") else user_frames(stacks)


def cpu_share(out, first, second):
    """first's share (%) of the two spins' CPU seconds the fixture printed."""
    cpu = dict(re.findall(r"\b(\w+_spin) ([0-9.]+)", out))
    a, b = float(cpu.get(first, 0)), float(cpu.get(second, 0))
    c.check(a > 0 and b > 0, f"no CPU times for {first} and {second}: {out!r}")
    return 100.0 * a / (a + b) if a > 0 and b > 0 else 0.0


def user_leaf(frames):
    """The program's innermost frame: an interrupt's kernel frames (a timer
    tick, softirqs: 19 % of the samples on a busy machine) may sit above it."""
    user = [x for x in frames[1:] if not x.endswith("_[k]")]
    return user[-1] if user else frames[-1]


def share(stacks, fn, self_only=True):
    n = total(stacks)
    if not n:
        return 0.0
    if self_only:
        return 100.0 * sum(k for f, k in stacks if user_leaf(f) == fn) / n
    return 100.0 * sum(k for f, k in stacks if fn in f[1:]) / n


def complete(stacks, root="_start"):
    """Share of samples whose stack reaches the thread's first frame."""
    n = total(stacks)
    firsts = (root, "__clone3", "clone3", "__clone")
    return 100.0 * sum(k for f, k in stacks if len(f) > 1 and f[1] in firsts) / n if n else 0.0


def unwound(stacks, root="_start"):
    """Every stack reaches the thread's first frame, but for at most
    max(2, 1 %) of them: a sample in a PLT stub under TSan (1 of 113) or in
    the kernel once the exiting process has no user memory (1 of 113) has
    no caller to give.  A broken unwinder loses far more."""
    n = total(stacks)
    missing = n - round(complete(stacks, root) * n / 100.0) if n else 0
    return n > 0 and missing <= max(2, n // 100)


def method_line(err):
    c.check("method perf (kernel cpu-clock events, DWARF unwinding" in err, f"no perf method line: {err}")


if mode == "default":
    # No --method: perf, nothing preloaded, an effective rate printed.
    rc, out, err, st = sample("d", work, "exit")
    c.check(rc == 3, f"exit status {rc}, expected the command's 3: {err}")
    method_line(err)
    c.check("samples per CPU-second" in err and "LD_PRELOAD" not in err, err)
    c.check(share(st, "main_spin") >= 95, f"main_spin {share(st, 'main_spin'):.1f}%: {st}")
    c.check(unwound(st), f"stacks not unwound to _start: {st}")
    # No -f: XPTRACE_SAMPLE_FREQ sets the rate, as for run --sample (the
    # perf method ignored it: 100 per CPU-second where 1000 was asked).
    rc, out, err = xp("sample", "-o", "envf", "--", work, "exit",
                      env=dict(os.environ, XPTRACE_SAMPLE_FREQ="1000"))
    m = re.search(r"(\d+) samples per CPU-second", err)
    c.check(m and int(m.group(1)) >= 500, f"XPTRACE_SAMPLE_FREQ=1000 without -f: {err}")
elif mode == "closefds":
    # The program closes stdout and stderr: the launcher still reports.
    rc, out, err, st = sample("c", work, "closefds")
    c.check(rc == 0, f"exit {rc}: {err}")
    c.check("main_spin (perf_work)" in err, f"no table after the program closed fd 1 and 2: {err}")
    c.check(share(st, "main_spin") >= 95 and total(st) >= 50, f"closefds: {st}")
elif mode == "exit":
    rc, out, err, st = sample("e", work, "exit")
    c.check(rc == 3, f"_exit status {rc}")
    c.check(share(st, "main_spin") >= 95 and total(st) >= 50, f"_exit: {st}")
    c.check("no samples written" not in err, err)
    # Every stack: [main];_start;__libc_start_main;...;main;main_spin, but
    # for a sample or two of start-up before main (under ASan its
    # __cxa_atexit interceptor took 1 of 99), complete as well.
    c.check(unwound(st) and share(st, "main", False) >= 97, f"_exit stacks: {st}")
elif mode == "plugin":
    # dlopen, hot plugin function, dlclose, more work: the plugin's frames
    # keep their names although it is gone at the end.
    rc, out, err, st = sample("p", work, "plugin", plugin)
    c.check(rc == 0, f"exit {rc}: {err}")
    # 3 units of work against 1, but the expectation is the CPU time each
    # spin really got: a core shared with another job runs slower, unevenly
    # (61.6 % for 75 nominal under CI's load, where the CPU times said 62).
    p = share(st, "plugin_spin")
    want = cpu_share(out, "plugin_spin", "main_spin")
    print(f"plugin_spin {p:.1f}% (CPU time: {want:.1f}%)")
    c.check(abs(p - want) <= 8, f"plugin_spin {p:.1f}%, expected {want:.1f} +- 8: {out} {st}")
    rows = {r["function"]: r for r in read_csv(os.path.join(scratch, "p", "samples.csv"))}
    mod = rows.get("plugin_spin", {}).get("module")
    c.check(mod == os.path.basename(plugin), f"plugin_spin module {mod}")
    c.check(unwound(st), f"plugin stacks not complete: {st}")
elif mode == "early":
    # A sample in ld.so's start-up, before libc is mapped, must not cut the
    # later stacks (a reused unwinder state did: every later stack stopped
    # at the first module reported after it). A high rate makes one likely.
    for attempt in range(6):
        name = f"e{attempt}"
        rc, out, err = xp("sample", "-f", "20000", "-o", name, "--", work, "plugin", plugin)
        raw = read_folded(os.path.join(scratch, name, "samples.folded")) or []
        early = sum(k for f, k in raw if "_dl_start" in f)
        if early:
            break
    c.check(rc == 0, f"exit {rc}: {err}")
    c.check(early > 0, f"no sample in ld.so's start-up in 6 runs at 20 kHz: {raw}")
    later = [(f, k) for f, k in raw if "_dl_start" not in f]
    print(f"{early} start-up sample(s), {complete(later):.2f}% of {total(later)} later stacks complete")
    c.check(total(later) >= 100 and unwound(later), f"stacks after a start-up sample cut: {later}")
    # The same with a real program: python3 samples, then imports extension
    # modules (dlopen), then samples in them (about half its stacks were cut).
    py = shutil.which("python3", path="/usr/bin:/bin")
    if py:
        script = os.path.join(scratch, "imports.py")
        with open(script, "w") as f:
            f.write("import time\n"
                    "def spin(t):\n"
                    "    e = time.process_time() + t\n"
                    "    while time.process_time() < e: pass\n"
                    "spin(0.3)\n"
                    "import decimal, json, sqlite3, hashlib, zlib\n"
                    "spin(0.3)\n")
        rc, out, err = xp("sample", "-f", "1000", "-o", "py", "--", py, script)
        st = [(f, k) for f, k in read_folded(os.path.join(scratch, "py", "samples.folded")) or []
              if "_dl_start" not in f]
        print(f"python3: {complete(st):.1f}% of {total(st)} stacks complete")
        # The bug cut about half; a deep import stack can outgrow the 16 KiB
        # stack copy (said: "ended early"), 8 of 250 in one loaded run.
        c.check(rc == 0 and total(st) >= 50 and complete(st) >= 90, f"python3 imports: {err} {st}")
elif mode == "plt":
    # Calls through the PLT: a sample in a stub is "labs@plt", as objdump
    # and perf name it (it was "<file>+0x1020", every stub one row).
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        print("SKIP [perf-plt]: no C compiler")
        sys.exit(77)
    src, exe = os.path.join(scratch, "pltcall.c"), os.path.join(scratch, "pltcall")
    with open(src, "w") as f:
        f.write("#include <stdio.h>\n#include <stdlib.h>\n"
                "__attribute__((noinline)) static long spin(long n) {\n"
                "  long t = 0;\n  for (long i = 0; i < n; ++i) t += labs(i - n / 2);\n  return t;\n}\n"
                "int main(void) { printf(\"%ld\\n\", spin(80000000)); return 0; }\n")
    subprocess.run([cc, "-O2", "-g", "-fno-builtin", "-o", exe, src], check=True)
    dis = subprocess.run(["objdump", "-d", exe], capture_output=True, text=True).stdout
    c.check("<labs@plt>:" in dis, "objdump names no labs@plt stub: the fixture has no PLT call")
    rc, out, err, st = sample("plt", exe)
    n = total(st)
    stub = sum(k for f, k in st if f[-1] == "labs@plt")
    print(f"labs@plt {stub} of {n} samples")
    c.check(rc == 0 and n >= 50, f"exit {rc}, {n} samples: {err}")
    c.check(stub >= n * 0.05, f"labs@plt self {stub} of {n}: {st}")
    c.check(not any(x.startswith("pltcall+0x") for f, _ in st for x in f), f"unnamed stub frames: {st}")
    c.check(unwound([(f, k) for f, k in st if f[-1] == "labs@plt"]), f"stubs' callers lost: {st}")
elif mode == "nosym":
    # A stripped plugin whose hot function is local (no symbol left):
    # module+0xoffset, one row at the function's start in the file (its
    # addresses grouped by the unwind index; it was one row per address).
    lib = os.path.join(scratch, "stripped.so")
    shutil.copy(plugin, lib)
    subprocess.run(["strip", "--strip-all", lib], check=True)
    syms = {p[3]: (int(p[0], 16), int(p[1], 16)) for p in
            (line.split() for line in subprocess.run(["nm", "-S", plugin], capture_output=True, text=True,
                                                     check=True).stdout.splitlines()) if len(p) == 4}
    start, size = syms["hidden_spin"]
    # vaddr -> file offset through the PT_LOAD holding it
    for line in subprocess.run(["readelf", "-lW", plugin], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if f[:1] == ["LOAD"] and int(f[2], 16) <= start < int(f[2], 16) + int(f[5], 16):
            start += int(f[1], 16) - int(f[2], 16)
    rc, out, err, st = sample("n", work, "plugin", lib, "plugin_hidden")
    c.check(rc == 0, f"exit {rc}: {err}")
    hits = inside = 0
    for f, k in st:
        m = re.fullmatch(r"stripped\.so\+0x([0-9a-f]+)", f[-1])
        hits += k if m and int(m.group(1), 16) == start else 0
        inside += k if m and start < int(m.group(1), 16) < start + size else 0
    c.check(inside == 0, f"hidden_spin split by address ({inside} samples not at its start): {st}")
    print(f"stripped.so+0x{start:x}..0x{start + size:x}: {100.0 * hits / max(total(st), 1):.1f}%")
    # 3 units against 1, but the truth is the CPU time each spin really got
    # (89.1 % for 75 nominal under the load harness; cf. mode plugin).
    want = cpu_share(out, "plugin_spin", "main_spin")
    print(f"(CPU time: {want:.1f}%)")
    c.check(abs(100.0 * hits / max(total(st), 1) - want) <= 8, f"hidden_spin as module+0xoffset: {out} {st}")
    c.check(share(st, "plugin_hidden", False) >= want - 8, f"its caller plugin_hidden (in .dynsym): {st}")
elif mode == "buildid":
    # The plugin's file is replaced (same path, another build id) after
    # the program unloaded it: no names read from the wrong file.
    lib = os.path.join(scratch, "swap.so")
    shutil.copy(plugin, lib)
    data = bytearray(open(plugin, "rb").read())
    notes = subprocess.run(["readelf", "-n", plugin], capture_output=True, text=True).stdout
    bid = bytes.fromhex(notes.split("Build ID: ")[1].split()[0])
    data[data.index(bid)] ^= 0xFF
    with open(lib + ".new", "wb") as f:
        f.write(data)
    p = subprocess.Popen([xptrace, "sample", "-f", "1000", "-o", "b", "--", work, "plugin", lib], cwd=scratch,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()  # "closed": dlclose'd, still running
    os.replace(lib + ".new", lib)
    out, err = p.communicate(timeout=170)
    st = read_folded(os.path.join(scratch, "b", "samples.folded")) or []
    c.check(p.returncode == 0 and line == "closed\n", f"exit {p.returncode}: {line} {err}")
    c.check(f"xptrace sample: {lib} was replaced after it was mapped (another build id)" in err, err)
    c.check(share(st, "plugin_spin", False) == 0, f"named from the replacing file: {st}")
    want = cpu_share(out, "plugin_spin", "main_spin")  # 75 nominal: the CPU time it got
    # any frame: an interrupt's kernel frames may sit above it (36 of 231 samples under load)
    c.check(sum(k for f, k in st if any(x.startswith("swap.so+0x") for x in f[1:])) >= (want - 8) / 100 * total(st),
            f"swap.so frames ({want:.1f}% of the CPU time): {out} {st}")
elif mode == "kcache":
    # Kernel names come from a cache of /proc/kallsyms per boot and module
    # set, kept in XDG_CACHE_HOME/xptrace when private to us: written by
    # the first run, read by the next (a planted name shows it is read),
    # ignored when others may write it.
    cache = os.path.join(scratch, "cache")
    env = {"XDG_CACHE_HOME": cache}
    rc, out, err, st = sample("c1", work, "syscalls", "1", env=env)
    if "user and kernel time" not in err:
        print(f"SKIP [{mode}]: no kernel frames here: {err.strip()}")
        sys.exit(77)
    names = {f[-1] for f, _ in st if f[-1].endswith("_[k]")}
    files = os.listdir(os.path.join(cache, "xptrace")) if os.path.isdir(os.path.join(cache, "xptrace")) else []
    c.check(rc == 0 and names and len(files) == 1 and files[0].startswith("kallsyms-"), f"no cache: {files} {names}")
    if files:
        path = os.path.join(cache, "xptrace", files[0])
        c.check(os.stat(path).st_mode & 0o777 == 0o600, f"cache mode {oct(os.stat(path).st_mode)}")
        with open(path) as f:
            lines = f.read().splitlines()
        c.check(len(lines) > 1000 and all(len(l.split()) == 3 for l in lines[:100]), f"cache: {lines[:3]}")
        with open(path, "w") as f:  # every symbol renamed: this run must show the planted names
            f.write("".join(f"{l.split()[0]} t planted{i}\n" for i, l in enumerate(lines)))
        rc, out, err, st = sample("c2", work, "syscalls", "1", env=env)
        kern = [f[-1] for f, _ in st if f[-1].endswith("_[k]")]
        c.check(rc == 0 and kern and all(k.startswith("planted") for k in kern), f"cache not read: {kern[:5]}")
        os.chmod(path, 0o666)  # writable by others: not trusted
        rc, out, err, st = sample("c3", work, "syscalls", "1", env=env)
        kern = [f[-1] for f, _ in st if f[-1].endswith("_[k]")]
        c.check(rc == 0 and kern and not any(k.startswith("planted") for k in kern), f"untrusted cache read: {kern[:5]}")
    rc, out, err, st = sample("c4", work, "syscalls", "1", env={"XDG_CACHE_HOME": cache, "XPTRACE_KSYM_CACHE": "0"})
    kern = [f[-1] for f, _ in st if f[-1].endswith("_[k]")]
    c.check(rc == 0 and kern and not any(k.startswith("planted") for k in kern), f"XPTRACE_KSYM_CACHE=0: {kern[:5]}")
elif mode == "kernel":
    # The command's own thread spends its CPU time in system calls: its
    # CPU time (the events' counts) against its samples, said with the cause.
    # The diagnostic is due when fewer than half of the CPU time is in user
    # space: measure the split of the same command alone (kernels differ).
    pid = os.spawnv(os.P_NOWAIT, work, [work, "syscalls", "2"])
    _, _, ru = os.wait4(pid, 0)
    kernel_share = ru.ru_stime / max(1e-9, ru.ru_utime + ru.ru_stime)
    said_re = (r"thread (\d+) \(perf_work\) used [0-9.]+ CPU-s but got \d+ samples \(\d+ expected\): its "
               r"time was mostly in the kernel")
    print(f"kernel share of the command alone: {100 * kernel_share:.0f}%")
    rc, out, err, st = sample("k", work, "syscalls", "2")
    c.check(rc == 0, f"exit {rc}: {err}")
    if "user and kernel time" in err:
        # Kernel time sampled (root, or perf_event_paranoid <= 1): the
        # samples in kernel frames are its share, and nothing is said.
        kern = 100.0 * sum(k for f, k in st if f[-1].endswith("_[k]")) / max(1, total(st))
        print(f"samples in the kernel: {kern:.0f}%")
        c.check(abs(kern - 100 * kernel_share) <= 15, f"kernel frames {kern:.0f}% for {100 * kernel_share:.0f}%")
        c.check(not re.search(said_re, err), f"a kernel-time diagnostic while kernel time is sampled: {err}")
    # User space only (what perf_event_paranoid 2 allows): told, with the cause.
    rc, out, err, st = sample("ku", work, "syscalls", "2", env={"XPTRACE_SAMPLE_KERNEL": "0"})
    c.check("user time only" in err, f"XPTRACE_SAMPLE_KERNEL=0 not user space only: {err}")
    said = re.search(said_re, err)
    if kernel_share >= 0.65:
        c.check(said, f"no diagnostic for the kernel time ({100 * kernel_share:.0f}% in the kernel): {err}")
    elif kernel_share < 0.35:
        c.check(not said, f"a kernel-time diagnostic with {100 * kernel_share:.0f}% in the kernel: {err}")
    # The same work in a second thread: its CPU time is read from /proc
    # while it runs (the launcher's), not at the command's end.
    rc, out, err, st = sample("kt", work, "thread-syscalls", "2", env={"XPTRACE_SAMPLE_KERNEL": "0"})
    pid = re.search(r"\(pid (\d+)\)", err)
    said = re.search(said_re, err)
    if kernel_share >= 0.65:
        c.check(said and pid and said.group(1) != pid.group(1), f"no diagnostic for the worker thread: {err}")
    elif kernel_share < 0.35:
        c.check(not said, f"a kernel-time diagnostic for the worker with {100 * kernel_share:.0f}% in the kernel: {err}")
    # Threads spinning in user space while the command's thread waits
    # (the kernel may swap its events with theirs): no such line.
    # The main thread itself may be told of: under TSan it spent 27 ms
    # creating the 20 threads, mostly in the kernel.
    for i in range(3):
        rc, out, err, st = sample(f"u{i}", work, "short", "20")
        pid = re.search(r"\(pid (\d+)\)", err)
        told = [l for l in err.splitlines() if "expected)" in l and
                not (pid and l.startswith(f"xptrace sample: thread {pid.group(1)} "))]
        c.check(not told, f"a diagnostic for user-space threads: {err}")
elif mode == "deep":
    # 200 frames of recursion without frame pointers: main in every stack.
    # A sample may fall in start-up or in the exit handlers after main
    # returned (one in about twenty runs): right, but not the shape under
    # test. Every sample in the recursion reaches main, 200 deep at the spin.
    rc, out, err, st = sample("r", work, "deep", "200")
    c.check(rc == 0, f"exit {rc}: {err}")
    rec = [(f, k) for f, k in st if "recurse" in f or "main_spin" in f]
    c.check(total(rec) >= 0.9 * total(st), f"recursion {total(rec)} of {total(st)} samples: {st}")
    c.check(all("main" in f[1:] for f, _ in rec), f"recursion without main: {rec}")
    depth = min((f.count("recurse") for f, _ in rec if f[-1] == "main_spin"), default=0)
    c.check(depth >= 200, f"shallowest stack has {depth} recurse frames")
    c.check("[truncated]" not in {x for f, _ in st for x in f}, "truncated with the default depth")
elif mode == "depth":
    # A depth limit below the stack: cut stacks are marked and said.
    rc, out, err, st = sample("t", work, "deep", "200", opts=("--depth", "50"))
    c.check(rc == 0, f"exit {rc}: {err}")
    # A sample taken before the recursion is deep (start-up: under TSan a
    # large share of a short run) is shallower than the limit and not cut;
    # every sample at the spin, 200 deep, is cut, marked and 50 deep.
    cut = [(f, k) for f, k in st if len(f) > 1 and f[1] == "[truncated]"]
    spin = [(f, k) for f, k in st if "main_spin" in f]
    uncut_spin = [(f, k) for f, k in spin if (f, k) not in cut]
    c.check(total(spin) >= 20 and not uncut_spin,
            f"{total(spin)} samples at the spin, uncut: {uncut_spin[:1]}; "
            f"all: {[(f[:3], len(f), k) for f, k in st]}")
    c.check(all(len(f) == 52 for f, _ in cut), f"depth: {[len(f) for f, _ in cut][:5]}")
    c.check(all(len(f) < 52 for f, _ in st if (f, _) not in cut), f"uncut deep stack: {st[:2]}")
    c.check("deeper than --depth 50 were cut" in err and "raise --depth" in err, err)
elif mode == "forkexec":
    # Parent 2 units, exec'd child 4 units: one tree, the child its process.
    rc, out, err, st = sample("f", work, "forkexec")
    c.check(rc == 0, f"exit {rc}: {err}")
    child = sum(k for f, k in st if f[0].startswith("[perf_work-") and f[-1] == "child_spin")
    parent = sum(k for f, k in st if f[0] == "[main]" and f[-1] == "main_spin")
    n = total(st)
    cs = 100.0 * child / n if n else 0
    want = cpu_share(out, "child_spin", "main_spin")
    print(f"child {cs:.1f}% (CPU time: {want:.1f}%), parent {100.0 * parent / max(n, 1):.1f}%")
    c.check(abs(cs - want) <= 8, f"fork/exec split: {out} {st}")
    # The rest falls in the fork, the exec'd program's start-up and its
    # first calls (5 of 163 samples under TSan, where fork is slow).  The
    # edges of the spins are right too: main itself, a call it makes (the
    # mode's strcmp, the parent's wait4) and the exit handlers; a loaded
    # machine (or ASan) puts a few samples there (3 of 160 in one CI run).
    # With kernel frames (root: per-CPU events), the fork, exec and wait
    # show as kernel frames under the caller, and a sample taken inside
    # the exec has no user frame at all.
    # The child's exec (execl -> execve before the kernel's part) and a
    # process's first malloc (tcache_init: the heap's first pages, slow
    # under load: 1 of 181 in the clang CI run) are the transition too.
    def transition(f):
        return f[-1] == "_start" or any(x in ("__fork", "_Fork", "arch_fork", "execl", "execve", "tcache_init")
                                        or x.startswith("_dl_") or x.endswith("_[k]") for x in f) \
            or all(x.startswith("[") for x in f)
    def edge(f):
        return "main" in f[-2:] or any(x in ("exit", "__run_exit_handlers") for x in f)
    other = [(f, k) for f, k in st if f[-1] not in ("child_spin", "main_spin") and not transition(f) and not edge(f)]
    c.check(total(other) <= 0.01 * n, f"samples outside the spins and the fork/exec: {other}")
    c.check(total(st) - child - parent - total(other) <= 0.1 * n, f"{n} samples, many at the edges: {st}")
    c.check("in 2 processes" in err and "process " in err, f"no per-process lines: {err}")
    # One trusted sequence per process (check_trace refuses a sequence
    # writing on two processes' tracks), every sample in the trace.
    p = subprocess.run([sys.executable, os.path.join(tests, "perfetto", "check_trace.py"), "proto",
                        os.path.join(tests, "perfetto", "perfetto_min.proto"),
                        os.path.join(scratch, "f", "samples.perfetto-trace"), "--perf-samples",
                        str(total(read_folded(os.path.join(scratch, "f", "samples.folded"))))],
                       capture_output=True, text=True)
    print(p.stdout)
    c.check(p.returncode == 0 and "processes=2" in p.stdout, f"check_trace: {p.stdout} {p.stderr}")
elif mode == "short":
    # One long thread and 100 short ones doing equal work: their samples
    # split as their CPU times (measured by the program: on a busy machine
    # equal work is not equal time). Issue 9's +-5 at 1 kHz.
    # The short threads run ~25 ms each here (12 or more periods on a
    # faster CPU). The kernel starts a thread's period when the thread
    # starts, so each thread loses what it ran of its last period: half a
    # period on average, at most one (docs/sampler.md). Threads of ~1 period
    # (500 of 1.2 ms here, 1 ms on CI) read 42-44 % for 50 (41.7 % on CI),
    # as perf record does with the same events.
    rc, out, err, st = sample("s", work, "short", "100", "20")
    c.check(rc == 0, f"exit {rc}: {err}")
    lng, sht = share(st, "long_spin"), share(st, "short_spin")
    cpu = out.split()
    cl, cs = (float(cpu[2]), float(cpu[4])) if len(cpu) == 5 else (1.0, 1.0)
    want = 100.0 * cl / (cl + cs)
    print(f"long {lng:.1f}% short {sht:.1f}% (CPU time: {want:.1f}/{100 - want:.1f})")
    c.check(len(cpu) == 5, f"no CPU times printed: {out}")
    c.check(abs(lng - want) <= 5 and abs(sht - (100 - want)) <= 5, f"long {lng:.1f}% short {sht:.1f}%")
    # 94 of 101 threads had samples once under TSan (cause not confirmed;
    # lost ring samples, counted and reported, are the likely one).
    threads = {f[0] for f, _ in st}
    c.check(len(threads) >= 81, f"{len(threads)} threads sampled of 101")
elif mode == "sigint":
    # Nothing of ours in the program: its SIGINT handler stays its own.
    rc, out, err, st = sample("i", work, "sigint")
    c.check(rc == 0 and "sigint=own" in out, f"sigint: {rc} {out} {err}")
    c.check(total(st) > 0, "no samples")
elif mode == "cxx":
    rc, out, err, st = sample("x", cxx, "4")
    c.check(rc == 0, f"exit {rc}: {err}")
    churn = "unsigned long shapes::churn<unsigned long>(long)"
    step = "shapes::Mixer<unsigned long>::step()"
    c.check(share(st, churn, False) >= 95, f"{churn}: {share(st, churn, False):.1f}%: {st}")
    inl = 100.0 * sum(k for f, k in st if len(f) > 2 and f[-1] == step and f[-2] == churn) / max(total(st), 1)
    print(f"inlined step under churn in {inl:.1f}% of the samples")
    c.check(inl >= 30, f"inlined frame: {inl:.1f}%: {st}")
    rc, out, err, st = sample("y", cxx, "2", opts=("--no-demangle",))
    names = {x for f, _ in st for x in f}
    c.check("_ZN6shapes5churnImEET_l" in names and churn not in names, f"--no-demangle: {names}")
elif mode == "xz":
    # A real Debian program (stripped, no frame pointers) on generated data.
    xz = shutil.which("xz")
    if not xz:
        print("SKIP [perf-xz]: xz not installed")
        sys.exit(77)
    rnd = random.Random(7)
    words = [("".join(rnd.choice("abcdefghij") for _ in range(rnd.randint(2, 9)))) for _ in range(5000)]
    data = os.path.join(scratch, "data.txt")
    with open(data, "w") as f:
        for _ in range(300000):
            f.write(rnd.choice(words) + (" " if rnd.random() < 0.9 else "\n"))
    rc, out, err, st = sample("z", xz, "-T1", "-6", "-k", "-f", data)
    c.check(rc == 0, f"xz exit {rc}: {err}")
    lz = share(st, "lzma_code", False)
    print(f"lzma_code in {lz:.1f}% of {total(st)} samples")
    c.check(lz >= 90, f"lzma_code inclusive {lz:.1f}%")
    c.check(any("liblzma.so.5" in x for f, _ in st for x in f), "no liblzma frames")
    cpu = err.split("samples, ")[-1].split(" CPU-seconds")[0] if "CPU-seconds" in err else "0"
    rate = total(st) / float(cpu) if float(cpu) else 0
    c.check(rate >= 900, f"{rate:.0f} samples per CPU-second at 1 kHz")
elif mode == "python":
    # Debian's python3 (no frame pointers; the interpreter's frames are C
    # frames): two functions timed by themselves, SHA-256 vs deflate 2:1.
    # Their native stacks tell them apart; the samples in neither (their
    # self-timing's clock_gettime, the interpreter's loop: ~5 %) are left
    # out of the split, so it is compared with the truth's split.
    py = "/usr/bin/python3"
    if not os.access(py, os.X_OK):
        print("SKIP [perf-python]: /usr/bin/python3 not installed")
        sys.exit(77)
    rc, out, err, st = sample("py", py, os.path.join(tests, "xptrace_sample", "python_split.py"), "2")
    c.check(rc == 0, f"python3 exit {rc}: {err}")
    m = re.search(r"hash_part=([0-9.]+) pack_part=([0-9.]+) process=([0-9.]+)", out)
    c.check(bool(m), f"the script printed no times: {out}")
    th, tp, proc = (float(x) for x in m.groups()) if m else (2, 1, 3)
    n = total(st)
    hashed = sum(k for f, k in st if any("SHA256" in x or x.startswith("_hashlib") for x in f))
    packed = sum(k for f, k in st if any(x.startswith("deflate") for x in f))
    print(f"{n} samples: hash_part {100 * hashed / max(n, 1):.1f} % (timed {100 * th / proc:.1f} %), "
          f"pack_part {100 * packed / max(n, 1):.1f} % (timed {100 * tp / proc:.1f} %)")
    c.check(hashed + packed >= 0.85 * n, f"only {hashed + packed} of {n} samples under SHA-256 or deflate")
    got, want = 100.0 * hashed / max(hashed + packed, 1), 100.0 * th / (th + tp)
    print(f"split hash:pack {got:.1f}:{100 - got:.1f} (truth {want:.1f}:{100 - want:.1f}, +- 5)")
    c.check(abs(got - want) <= 5, f"hash_part {got:.1f}% of the two against {want:.1f}% +- 5")
    c.check(n >= 0.8 * proc * 1000, f"{n} samples for {proc:.2f} CPU-s at 1 kHz")
elif mode == "trace":
    # The 50 short threads' stacks reach start_thread; the main thread
    # creating them takes a few samples of its own (2 of 101 once under
    # ASan, on a loaded machine), hence 95 %, not 99.
    # User space only: with kernel frames (root) the samples taken in the
    # kernel while a thread starts or exits hold no start_thread (93.5 %
    # under clang in CI); the kernel modes check those.
    rc, out, err, st = sample("tr", work, "short", "50",
                              env={"XPTRACE_SAMPLE_KERNEL": "0"})
    c.check(rc == 0, f"exit {rc}: {err}")
    trace = os.path.join(scratch, "tr", "samples.perfetto-trace")
    # The trace holds every sample, the loader's start-up ones included.
    every = total(read_folded(os.path.join(scratch, "tr", "samples.folded")) or [])
    p = subprocess.run([sys.executable, os.path.join(tests, "perfetto", "check_trace.py"), "proto",
                        os.path.join(tests, "perfetto", "perfetto_min.proto"), trace,
                        "--perf-samples", str(every), "--sample-function", "start_thread>=95",
                        "--sample-function", "long_spin>=40"], capture_output=True, text=True)
    print(p.stdout)
    c.check(p.returncode == 0, f"check_trace: {p.stdout} {p.stderr}")
elif mode == "fp":
    # --call-graph fp: the kernel's frame-pointer chains, no DWARF unwinder
    # (it once crashed at the first exec record).
    rc, out, err, st = sample("fp", work, "exit", opts=("--call-graph", "fp"))
    c.check(rc == 3, f"exit status {rc}, expected the command's 3: {err}")
    c.check("frame-pointer call chains" in err, f"no fp method line: {err}")
    c.check(total(st) >= 50 and share(st, "main_spin") >= 95, f"fp: {st}")
elif mode == "fallback":
    # Wall time needs the timer method: chosen with one line saying why.
    rc, out, err = xp("sample", "--clock", "realtime", "-o", "w", "--", "true")
    c.check("needs the timer method; using it" in err, f"{rc} {err}")
    # Asked of the perf method, wall time comes from context switches
    # (kernel sampling), or one line says why there is none.
    rc, out, err = xp("sample", "--method", "perf", "--clock", "realtime", "-o", "w2", "--", "sleep", "0.05")
    c.check(rc == 0 and ("of wall time (CPU samples and off-CPU intervals)" in err
                         or "no wall-time profile: context-switch samples need" in err), f"{rc} {err}")
    rc, out, err = xp("sample", "--method", "perf", "--periods", "realtime:0:1:1 cputime:0:1:1", "-o", "w4", "--", "true")
    c.check(rc == 2 and "the perf method takes --periods on one clock" in err, f"{rc} {err}")
    rc, out, err = xp("sample", "--method", "timer", "--off-cpu", "-o", "w5", "--", "true")
    c.check(rc == 2 and "--off-cpu needs the perf method" in err, f"{rc} {err}")
    rc, out, err = xp("sample", "--call-graph", "lbr", "-o", "w3", "--", "true")
    c.check(rc == 2 and "unknown call graph 'lbr'" in err, f"{rc} {err}")
    # No sample at all: the reason is said, never "no samples written" alone.
    # At 1 Hz `true` (~2 ms of CPU) is almost never sampled; per-CPU events
    # have a random phase, so a sample is possible: then no reason is owed.
    rc, out, err = xp("sample", "--method", "perf", "-f", "1", "-o", "t", "--", "true")
    sampled = " 0 cputime samples" not in err and "no samples" not in err
    c.check(rc == 0 and (sampled or ("no samples: the program used" in err and "raise -f" in err)),
            f"true: {rc} {err}")
else:
    c.check(False, f"unknown mode {mode}")

sys.exit(c.done())
