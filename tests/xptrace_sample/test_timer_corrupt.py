"""`xptrace finish` on damaged timer recordings (samples*.xsamp): each is
refused with one line or read within its bounds; never a crash.  Needs
no preload, so it runs in every build (the sanitizers watch the reader).

usage: test_timer_corrupt.py XPTRACE SCRATCH
"""
import os
import random
import shutil
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sampler"))
from samples import Checker, run  # noqa: E402

xptrace, scratch = sys.argv[1:3]
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
c = Checker("corrupt")
HEADER_SIZE, CHUNK = 8192, 16384


def header(nchunks, next_chunk, version=1, chunk=CHUNK, magic=b"XPTSAMP1"):
    h = struct.pack("<8sIIIIIIIiiI2B6xdd", magic, version, HEADER_SIZE, chunk, nchunks, next_chunk,
                    nchunks, 1, 4242, 1, 64, 1, 0, 100.0, 100.0)
    h += struct.pack("<QQQQQ", 1000, 0, 2000, 0, 0) + b"damaged".ljust(64, b"\0")
    return h.ljust(HEADER_SIZE, b"\0")


def chunk(records, owner=1, used=None):
    body = b"".join(records)
    return (struct.pack("<II", len(body) if used is None else used, owner) + body).ljust(CHUNK, b"\0")


def sample(thread, depth, pcs, size=None):
    n = 24 + 8 * len(pcs)
    return struct.pack("<HHIQIBBH", 1, n if size is None else size, thread, 1500, 1, 0, 0, depth) + \
        b"".join(struct.pack("<Q", p) for p in pcs)


def thread(kind, index, tid):
    return struct.pack("<HHIQiB3xQQQ16s", kind, 64, index, 1100, tid, 0, 10**9, 5, 0, b"t")


def mapping(path, nul=True, size=None):
    body = path + (b"\0" if nul else b"")
    n = (48 + len(body) + 7) & ~7
    return (struct.pack("<HHIQQQQQ", 4, n if size is None else size, 0, 1000, 0x1000, 0x2000, 0, 0) + body).ljust(n, b"\0")


cases = {
    "short": b"XPTSAMP1",
    "version": header(1, 1, version=9) + chunk([]),
    "magic": header(1, 1, magic=b"NOTSAMP!") + chunk([]),
    "nchunks": header(1000, 1000) + chunk([]),
    "chunk-size": header(1, 1, chunk=7) + chunk([]),
    "used": header(2, 2) + chunk([thread(2, 0, 4242)], owner=2) + chunk([sample(0, 1, [0x1100])], used=999999),
    "record-size": header(2, 2) + chunk([thread(2, 0, 4242)], owner=2) + chunk([sample(0, 1, [0x1100], size=0)]),
    "odd-size": header(2, 2) + chunk([thread(2, 0, 4242)], owner=2) + chunk([sample(0, 1, [0x1100], size=27)]),
    "depth": header(2, 2) + chunk([thread(2, 0, 4242)], owner=2) + chunk([sample(0, 60000, [0x1100])]),
    "thread-index": header(2, 2) + chunk([thread(2, 1 << 30, 4242)], owner=2) + chunk([sample(1 << 30, 1, [1])]),
    "map-nul": header(1, 1) + chunk([mapping(b"/no/such/lib.so", nul=False)], owner=2),
    "map-size": header(1, 1) + chunk([mapping(b"/x", size=60000)], owner=2),
    "next-chunk": header(1, 50) + chunk([thread(2, 0, 4242)], owner=2),
}
rng = random.Random(7)
for i in range(30):
    # A valid header, chunks of random bytes, some with plausible lengths.
    body = b"".join(struct.pack("<II", rng.randrange(0, CHUNK), rng.choice((1, 2))) +
                    bytes(rng.randrange(256) for _ in range(CHUNK - 8)) for _ in range(2))
    cases[f"random-{i}"] = header(2, 2) + body

for name, data in cases.items():
    d = os.path.join(scratch, name)
    os.makedirs(d)
    with open(os.path.join(d, "samples.xsamp"), "wb") as f:
        f.write(data)
    rc, out, err = run([xptrace, "finish", d], cwd=scratch, timeout=60)
    c.check(rc in (0, 1), f"{name}: exit {rc}: {err[-2000:]}")
    c.check("ERROR: AddressSanitizer" not in err and "runtime error" not in err and "WARNING: ThreadSanitizer" not in err,
            f"{name}: {err[-3000:]}")
    bad = [line for line in err.splitlines() if line and not line.startswith(("xptrace", "  "))]
    c.check(not bad, f"{name}: lines not ours: {bad[:5]}")

sys.exit(c.done())
