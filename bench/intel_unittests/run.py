#!/usr/bin/env python3
"""Build Intel's XPTI unit tests against our header and dispatcher; count.

  bench/intel_unittests/run.py SRC [--build DIR] [--include DIR] [--lib DIR]
                                   [--work DIR] [--cxx CXX] [--list]

SRC is a folder holding Intel's xpti_api_tests.cpp and
xpti_correctness_tests.cpp (intel/llvm, xptifw/unit_test/), obtained by the
user: nothing is fetched, nothing of Intel's enters the repository.  Each
file is compiled with our include/ (Debian's gtest, libgtest-dev); a test
whose lines the compiler rejects is left out (#if 0 around it) and the file
compiled again, so "compiles" counts tests, not files.  The binary links our
libxptifw.so and runs each test in its own process (a crash costs one test),
then all of them in one process as Intel runs them.  Prints one line per
test and the totals; exits 0 unless nothing could be built.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

FILES = ("xpti_api_tests.cpp", "xpti_correctness_tests.cpp")
TEST_START = re.compile(r"^TEST(_F)?\(\s*(\w+)\s*,\s*(\w+)?")


def blocks(lines):
    """(first, last, name) of each TEST/TEST_F: from its line to the next '}' in column 0."""
    out = []
    i = 0
    while i < len(lines):
        m = TEST_START.match(lines[i])
        if m:
            suite, name = m.group(2), m.group(3)
            j = i
            if not name:  # the name on the next line
                j += 1
                name = lines[j].strip().rstrip(") {").strip(",").strip()
            k = j
            while k < len(lines) and not lines[k].startswith("}"):
                k += 1
            out.append((i, k, f"{suite}.{name}"))
            i = k
        i += 1
    return out


def compile_file(cxx, src, obj, include, workdir):
    """Compile src, leaving out the tests the compiler rejects."""
    with open(src) as f:
        lines = f.read().split("\n")
    tests = blocks(lines)
    dropped = {}  # name -> first error
    while True:
        text = list(lines)
        for first, last, name in tests:
            if name in dropped:
                text[first] = "#if 0 // left out: " + text[first]
                text[last] = text[last] + "\n#endif"
        path = os.path.join(workdir, os.path.basename(src))
        with open(path, "w") as f:
            f.write("\n".join(text))
        r = subprocess.run([cxx, "-std=c++17", "-w", "-g", "-O1", "-I", include, "-c", path, "-o", obj],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return tests, dropped
        new = False
        outside = None
        for m in re.finditer(r"^[^:\n]*" + re.escape(os.path.basename(src)) + r":(\d+):\d+: error: (.*)$",
                             r.stderr, re.M):
            line = int(m.group(1)) - 1  # the #endif lines added shift nothing: appended
            owner = [t for t in tests if t[0] <= line <= t[1]]
            if not owner:
                outside = m.group(0)
                continue
            name = owner[0][2]
            if name not in dropped:
                dropped[name] = m.group(2)
                new = True
        if not new:
            sys.stderr.write(f"xptrace: intel_unittests: {src}: an error outside any test:\n"
                             f"{outside or r.stderr[-2000:]}\n")
            return tests, None


def clean_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("XPTI_")}
    return env


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("--build", default=os.path.join(root, "build"))
    ap.add_argument("--include", default=os.path.join(root, "include"))
    ap.add_argument("--lib", help="folder of libxptifw.so (default BUILD/lib)")
    ap.add_argument("--work", help="scratch folder (default: a temporary one)")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    ap.add_argument("--list", action="store_true", help="print every test's result")
    a = ap.parse_args()
    lib = a.lib or os.path.join(a.build, "lib")
    if not os.path.exists(os.path.join(lib, "libxptifw.so")):
        sys.exit(f"xptrace: intel_unittests: no libxptifw.so in {lib} (build first)")
    work = a.work or tempfile.mkdtemp(prefix="xpti-intel-ut-")
    os.makedirs(work, exist_ok=True)

    objs, all_tests, left_out = [], [], {}
    for name in FILES:
        src = os.path.join(a.src, name)
        if not os.path.exists(src):
            sys.exit(f"xptrace: intel_unittests: {src}: missing (give Intel's xptifw/unit_test folder)")
        obj = os.path.join(work, name + ".o")
        tests, dropped = compile_file(a.cxx, src, obj, a.include, work)
        all_tests += [t[2] for t in tests]
        if dropped is None:
            left_out.update({t[2]: "file does not compile" for t in tests})
            continue
        left_out.update(dropped)
        objs.append(obj)
    exe = os.path.join(work, "XPTIFWUnitTests")
    if objs:
        r = subprocess.run([a.cxx, "-o", exe, *objs, "-L", lib, "-Wl,-rpath," + os.path.abspath(lib),
                            "-lxptifw", "-lgtest_main", "-lgtest", "-pthread"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("xptrace: intel_unittests: link failed:\n" + r.stderr[-2000:])

    results = {}
    for t in all_tests:
        if t in left_out:
            results[t] = ("does not compile", left_out[t])
            continue
        out = os.path.join(work, "one.json")
        if os.path.exists(out):
            os.remove(out)
        try:
            r = subprocess.run([exe, f"--gtest_filter={t}", f"--gtest_output=json:{out}"],
                               capture_output=True, text=True, env=clean_env(), timeout=300)
        except subprocess.TimeoutExpired:
            results[t] = ("fails", "timed out")
            continue
        if os.path.exists(out):
            with open(out) as f:
                case = json.load(f)["testsuites"][0]["testsuite"][0]
            fails = case.get("failures", [])
            results[t] = ("passes", "") if not fails else (
                "fails", fails[0]["failure"].split("\n")[0] + " " +
                " ".join(fails[0]["failure"].split("\n")[1:3]))
        else:
            results[t] = ("fails", f"crashed (status {r.returncode})")

    together = None
    if objs:
        r = subprocess.run([exe], capture_output=True, text=True, env=clean_env(), timeout=600)
        m = re.search(r"\[  PASSED  \] (\d+) test", r.stdout)
        together = int(m.group(1)) if m else f"crashed (status {r.returncode})"

    compiled = sum(1 for v in results.values() if v[0] != "does not compile")
    passed = sum(1 for v in results.values() if v[0] == "passes")
    for t in all_tests:
        state, why = results[t]
        if a.list or state != "passes":
            print(f"{t:70s} {state}{': ' + why if why else ''}")
    print(f"{len(all_tests)} tests: {compiled} compile, {passed} pass (each in its own process); "
          f"all in one process: {together} pass")
    return 0 if objs else 1


if __name__ == "__main__":
    sys.exit(main())
