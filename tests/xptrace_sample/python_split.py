"""Two functions of known CPU split for the sampler on Debian's python3
(test_perf_sample.py python, bench/sampler/real_programs.py): hash_part
hashes with SHA-256 (libcrypto) for 2 ms of thread CPU time per round,
pack_part compresses with zlib (deflate) for 1 ms; calls are short (16 KiB
each), and each part times itself: it prints what they really took
("cpu hash_part=S pack_part=S process=S"), the truth under any load.
usage: python3 python_split.py SECONDS_OF_CPU"""
import hashlib
import sys
import time
import zlib

data = bytes(range(256)) * 64
tt = time.thread_time_ns


def hash_part(ns):
    t0 = tt()
    while tt() - t0 < ns:
        hashlib.sha256(data).digest()
    return tt() - t0


def pack_part(ns):
    t0 = tt()
    while tt() - t0 < ns:
        zlib.compress(data, 6)
    return tt() - t0


secs = float(sys.argv[1]) if len(sys.argv) > 1 else 2
a = b = 0
end = time.process_time() + secs
while time.process_time() < end:
    a += hash_part(2_000_000)
    b += pack_part(1_000_000)
print(f"cpu hash_part={a / 1e9:.6f} pack_part={b / 1e9:.6f} process={time.process_time():.6f}")
