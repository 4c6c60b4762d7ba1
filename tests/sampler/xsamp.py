"""Reader of the timer sampler's recordings (src/sampler/sampler_rec.h),
independent of the launcher's: the library tests check what was recorded
against the program's known shape.  Symbols come from `nm` (binutils)."""
import bisect
import os
import struct
import subprocess

HEADER = struct.Struct("<8sIIIIIIIiiI2B6xdd")
SAMPLE, THREAD, THREAD_END, MAP, UNMAP = 1, 2, 3, 4, 5
FLAG_EXITED, FLAG_SIGPROF_TAKEN, FLAG_SIGPROF_HELD, FLAG_FORKED, FLAG_EXECED = 1, 2, 8, 16, 32
OWNER_THREADS, OWNER_META = 1, 2


class Recording:
    def __init__(self, path):
        with open(path, "rb") as f:
            d = f.read()
        (magic, self.version, self.header_size, self.chunk_size, self.nchunks, self.next_chunk,
         _, self.flags, self.pid, self.ppid, self.depth, on0, on1, f0, f1) = HEADER.unpack_from(d, 0)
        assert magic == b"XPTSAMP1", magic
        self.freq = (f0, f1)
        self.start_ns, self.start_cpu_ns, self.end_ns, self.end_cpu_ns, self.lost = \
            struct.unpack_from("<QQQQQ", d, HEADER.size)
        self.program = d[HEADER.size + 40:HEADER.size + 104].split(b"\0")[0].decode()
        self.path = path
        self.samples = []   # (thread index, clock, weight, time, pcs, truncated)
        self.threads = {}   # index -> dict(tid, cpu_ns, weight, blocked, name, ended)
        self.maps = []      # dict(start, end, offset, bias, path, time, unmapped)
        for i in range(min(self.next_chunk, self.nchunks)):
            off = self.header_size + i * self.chunk_size
            used, owner = struct.unpack_from("<II", d, off)
            p, end = off + 8, off + 8 + used
            while p + 8 <= end:
                kind, size, thread = struct.unpack_from("<HHI", d, p)
                if size < 8 or p + size > end:
                    break
                if kind == SAMPLE:
                    t, weight, clock, trunc, depth = struct.unpack_from("<QIBBH", d, p + 8)
                    pcs = struct.unpack_from(f"<{depth}Q", d, p + 24)
                    self.samples.append((thread, clock, weight, t, pcs, trunc))
                elif kind in (THREAD, THREAD_END):
                    t, tid, blocked = struct.unpack_from("<QiB", d, p + 8)
                    cpu, w0, w1 = struct.unpack_from("<QQQ", d, p + 24)
                    name = d[p + 48:p + 64].split(b"\0")[0].decode(errors="replace")
                    th = self.threads.setdefault(thread, {"tid": tid, "ended": False})
                    if kind == THREAD_END:
                        th.update(cpu_ns=cpu, weight=(w0, w1), blocked=bool(blocked), name=name, ended=True)
                elif kind in (MAP, UNMAP):
                    t, start, stop, offset, bias = struct.unpack_from("<QQQQQ", d, p + 8)
                    path = d[p + 48:p + size].split(b"\0")[0].decode(errors="replace")
                    if kind == MAP:
                        self.maps.append(dict(start=start, end=stop, offset=offset, bias=bias, path=path,
                                              time=t, unmapped=None))
                    else:
                        for m in self.maps:
                            if m["unmapped"] is None and m["bias"] == bias and m["path"] == path:
                                m["unmapped"] = t
                p += size

    def module_at(self, pc, t):
        """The mapping holding pc at time t: of those covering pc, the
        one unloaded first after t (still loaded: last)."""
        best = None
        for m in self.maps:
            if m["start"] <= pc < m["end"] and (m["unmapped"] is None or m["unmapped"] >= t):
                if best is None or (m["unmapped"] or 2**64) < (best["unmapped"] or 2**64):
                    best = m
        return best


_symbols = {}


def symbols(path):
    """Sorted (address, name) of a file's function symbols (file addresses)."""
    if path not in _symbols:
        out = ""
        if os.path.exists(path):
            out = subprocess.run(["nm", "-C", "--defined-only", path], capture_output=True, text=True).stdout
            if not out.strip():
                out = subprocess.run(["nm", "-D", "-C", "--defined-only", path], capture_output=True,
                                     text=True).stdout
        syms = []
        for line in out.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[1] in "tTwW":
                syms.append((int(parts[0], 16), parts[2]))
        syms.sort()
        _symbols[path] = ([a for a, _ in syms], [n for _, n in syms])
    return _symbols[path]


def name_of(rec, pc, t):
    m = rec.module_at(pc, t)
    if m is None:
        return "[unknown]"
    addrs, names = symbols(m["path"])
    i = bisect.bisect_right(addrs, pc - m["bias"]) - 1
    return names[i] if i >= 0 else "[%s]" % os.path.basename(m["path"])


def stacks(rec, clock=0):
    """[(thread index, [outermost..innermost names], weight)]."""
    out = []
    for thread, c, weight, t, pcs, _ in rec.samples:
        if c != clock:
            continue
        names = [name_of(rec, pc if i == 0 else pc - 1, t) for i, pc in enumerate(pcs)]
        out.append((thread, list(reversed(names)), weight))
    return out


def recordings(folder):
    """Every recording under folder."""
    found = []
    for root, _, files in os.walk(folder):
        for f in files:
            if f.startswith("samples") and f.endswith(".xsamp"):
                found.append(Recording(os.path.join(root, f)))
    return sorted(found, key=lambda r: r.start_ns)


def folded(folder, clock=0):
    """The recordings of folder's own process as samples.folded would
    read: [(frames, weight)], frames[0] "[main]" or "[thread-N]", the
    sampler's own frames left out; None when there is no recording."""
    path = None
    for f in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if f.startswith("samples") and f.endswith(".xsamp"):
            path = os.path.join(folder, f)
            break
    if path is None:
        return None
    rec = Recording(path)
    out = []
    for thread, c, weight, t, pcs, trunc in rec.samples:
        if c != clock:
            continue
        names = []
        for i, pc in enumerate(pcs):
            m = rec.module_at(pc if i == 0 else pc - 1, t)
            if m and os.path.basename(m["path"]) == "libxptrace_sampler.so":
                continue
            names.append(name_of(rec, pc if i == 0 else pc - 1, t))
        label = "[main]" if thread == 0 else "[thread-%d]" % thread
        out.append(([label] + (["[truncated]"] if trunc & 1 else []) + list(reversed(names)), weight))
    return out
