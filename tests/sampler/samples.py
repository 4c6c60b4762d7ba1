"""Shared helpers of the sampler tests: read samples.folded / samples.csv,
run a command, collect failures."""
import os
import re
import subprocess
import sys


class Checker:
    def __init__(self, mode):
        self.mode = mode
        self.failures = 0

    def check(self, condition, message):
        if not condition:
            print(f"FAIL [{self.mode}]: {message}", file=sys.stderr)
            self.failures += 1
        return condition

    def done(self):
        if self.failures:
            print(f"{self.failures} failure(s) in {self.mode}", file=sys.stderr)
            return 1
        print(f"ok {self.mode}")
        return 0


def run(args, env=None, cwd=None, timeout=120):
    full_env = dict(os.environ)
    for key in list(full_env):
        if key.startswith("XPTRACE_") or key in ("LD_PRELOAD",):
            del full_env[key]
    if env:
        full_env.update(env)
    p = subprocess.run(args, env=full_env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def read_folded(path):
    """[(frames list, count)]; frames[0] is the thread."""
    stacks = []
    if not os.path.exists(path):
        return None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            text, _, count = line.rpartition(" ")
            stacks.append((text.split(";"), int(count)))
    return stacks


def total(stacks):
    return sum(c for _, c in stacks)


def inclusive(stacks, function, thread=None):
    return sum(c for frames, c in stacks
               if function in frames[1:] and (thread is None or frames[0] == thread))


def threads(stacks):
    return sorted({frames[0] for frames, _ in stacks})


def cpu_seconds(stdout):
    m = re.search(r"cpu_seconds=([0-9.]+)", stdout)
    return float(m.group(1)) if m else None


def read_csv(path):
    import csv
    with open(path) as f:
        return list(csv.DictReader(f))


def user_frames(stacks):
    """The stacks without their innermost kernel frames ("name_[k]", the
    perf method's where kernel time is sampled): for tests of user-space
    shapes, a sample in an interrupt or a system call counts for the user
    function it came from."""
    out = []
    for frames, count in stacks or []:
        n = len(frames)
        while n > 2 and frames[n - 1].endswith("_[k]"):
            n -= 1
        out.append((frames[:n], count))
    return out


def attach_and_release(cmd, prog, cwd, preexec_fn=None):
    """Starts `cmd` (an `xptrace sample -p` of `prog`, which waits for a
    line on stdin), lets `prog` go once xptrace says its events are open,
    and returns (xptrace's exit status, prog's stdout, xptrace's stderr)."""
    import subprocess
    xpt = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           preexec_fn=preexec_fn)
    err = ""
    while True:  # its events are open once it says so
        line = xpt.stderr.readline()
        err += line
        if not line or "attached to" in line or "cannot attach" in line:
            break
    prog.stdin.write("go\n")
    prog.stdin.close()
    out = prog.stdout.read()
    prog.wait(timeout=120)
    err += xpt.stderr.read()  # to its end: it ends with the program
    return xpt.wait(timeout=120), out, err
