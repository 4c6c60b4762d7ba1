#!/usr/bin/env python3
"""Queues made and released while another works (cl_requeue.c): the
trace (JSON) has one device track per queue, 21 of them with distinct
names, the long-lived queue's track holds its 20 kernels and every
short-lived one's its single kernel.
usage: run_requeue.py LAYER DISPATCHER COLLECTOR PROGRAM OUTDIR"""
import collections
import json
import os
import shutil
import subprocess
import sys

ROUNDS = 20


def fail(msg):
    print("run_requeue: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    layer, dispatcher, collector, program, out = sys.argv[1:6]
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, XPTI_TRACE_ENABLE="1", XPTI_FRAMEWORK_DISPATCHER=dispatcher,
               XPTI_SUBSCRIBERS=collector, OPENCL_LAYERS=layer, XPTRACE_OUTPUT=out,
               XPTRACE_TRACE_FORMAT="json")
    p = subprocess.run([program], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    if p.returncode == 77:
        print(p.stderr)
        sys.exit(77)
    if p.returncode != 0:
        fail("%s exited %d\n%s" % (program, p.returncode, p.stderr))
    with open(os.path.join(out, "trace.json")) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    tracks = {e["tid"]: e["args"]["name"] for e in events
              if e.get("ph") == "M" and e.get("name") == "thread_name"
              and e["args"]["name"].startswith("OpenCL queue ")}
    kernels = collections.Counter(e["tid"] for e in events
                                  if e.get("tid") in tracks and e.get("ph") in ("X", "B")
                                  and "scale" in e.get("name", ""))
    names = sorted(tracks.values())
    print("run_requeue: %d queue tracks, kernels per track %s"
          % (len(tracks), sorted(kernels.values())))
    if len(tracks) != ROUNDS + 1 or len(set(names)) != ROUNDS + 1:
        fail("expected %d queue tracks with distinct names, got %s" % (ROUNDS + 1, names))
    if sorted(kernels.values()) != [1] * ROUNDS + [ROUNDS]:
        fail("kernels per queue track %s, expected %d tracks of 1 and one of %d"
             % (dict(kernels), ROUNDS, ROUNDS))
    print("run_requeue: OK")


main()
