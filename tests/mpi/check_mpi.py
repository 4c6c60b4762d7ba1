#!/usr/bin/env python3
"""Check the traces of an MPI run of tests/mpi/mpi_app.c.

  check_mpi.py PROTO_FILE MODE ROUNDS SIZE DIR... [--apply TOOL] [--skew RANK:NS]
                [--merged TRACE]

DIR: the output folders of the run (one per rank; a rank's folder holds
trace*.perfetto-trace and mpi-clock.<pid>).  Checks, for MODE (ring,
exchange, collective, fork) and SIZE ranks:
- SIZE processes, named "<program> rank R/SIZE", one per rank;
- exact counts of MPI slices per rank (mpi.api), properly nested;
- every message a flow from the right send (rank, call, order) to the
  right receive, and no other flow;
- with --apply TOOL (tests/mpi/mpi_clock_apply): every timestamp mapped to
  rank 0's clock by the correction of src/trace/xpt_clock_correct.c;
  then every flow must start no later than it ends;
- with --merged TRACE (xptrace merge of the DIRs): the same checks on the
  ranks' processes of that one trace, whose times the merge corrected;
- with --skew RANK:NS (the run had XPTRACE_MPI_TEST_CLOCK_OFFSET_NS):
  the rank's clock estimates must see the offset (offset = -NS within
  the round trip), and without correction some message must seem to go
  back in time (the skew is visible), with it none may.
Prints one line per rank; exits 1 with a reason on the first failure."""
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "perfetto"))
import check_trace as ct  # noqa: E402  (parse_text, one, constants)


def fail(msg):
    print("check_mpi: FAIL: " + msg)
    sys.exit(1)


def read_clock(path):
    out = {"est": []}
    for line in open(path):
        k, *v = line.split()
        if k in ("rank", "size", "pid", "test_offset_ns"):
            out[k] = int(v[0])
        elif k in ("init", "finalize"):
            out["est"].append(tuple(int(x) for x in v))
    return out


def decode(proto, trace):
    """-> {pid: {"name": process name, "slices": [slice dicts in order]}}."""
    out = subprocess.run(["protoc", "--decode=perfetto.protos.Trace", "-I", os.path.dirname(proto), proto],
                         stdin=open(trace, "rb"), capture_output=True)
    if out.returncode:
        fail("protoc: " + out.stderr.decode(errors="replace"))
    root = ct.parse_text(out.stdout.decode("utf-8", "replace"))
    seqs, procs, stacks, track_pid = {}, {}, {}, {}
    for p in root.get("packet", []):
        sid = ct.one(p, "trusted_packet_sequence_id", 0)
        st = seqs.setdefault(sid, {"names": {}, "cats": {}, "inc": None, "clock": None, "track": None})
        d = ct.one(p, "trace_packet_defaults")
        if d:
            st["clock"] = ct.one(d, "timestamp_clock_id")
            ted = ct.one(d, "track_event_defaults")
            if ted:
                st["track"] = ct.one(ted, "track_uuid")
        cs = ct.one(p, "clock_snapshot")
        if cs:
            clocks = {ct.one(c, "clock_id"): c for c in cs.get("clocks", [])}
            for cid, c in clocks.items():
                if cid >= ct.INCREMENTAL_MIN:
                    st["inc"] = [ct.one(c, "timestamp"),
                                 ct.one(clocks[ct.MONOTONIC], "timestamp") - ct.one(c, "timestamp")]
        i = ct.one(p, "interned_data")
        if i:
            for key, table in (("event_names", "names"), ("event_categories", "cats")):
                for e in i.get(key, []):
                    st[table][ct.one(e, "iid")] = ct.one(e, "name")
        td = ct.one(p, "track_descriptor")
        if td and ct.one(td, "process"):
            pr = ct.one(td, "process")
            procs.setdefault(ct.one(pr, "pid"), {"slices": []})["name"] = ct.one(pr, "process_name")
        if td and ct.one(td, "thread"):
            track_pid[ct.one(td, "uuid")] = ct.one(ct.one(td, "thread"), "pid")
        ts = None
        if "timestamp" in p:
            clock = ct.one(p, "timestamp_clock_id", st["clock"])
            raw = ct.one(p, "timestamp")
            if clock is None or clock == ct.MONOTONIC:
                ts = raw
            else:
                st["inc"][0] += raw
                ts = st["inc"][0] + st["inc"][1]
        te = ct.one(p, "track_event")
        if not te:
            continue
        track = ct.one(te, "track_uuid", st["track"])
        stack = stacks.setdefault(track, [])
        etype = ct.one(te, "type")
        # Perfetto binds a flow to the slice its event begins, ends or (an
        # instant) is, and draws it from the earlier-starting of the two:
        # "in" keeps (flow, the start of the slice it is bound to).
        if etype == "TYPE_SLICE_BEGIN":
            name = st["names"].get(ct.one(te, "name_iid")) if "name_iid" in te else ct.one(te, "name")
            cats = [st["cats"].get(c) for c in te.get("category_iids", [])] + te.get("categories", [])
            s = {"name": name, "cat": cats[0] if cats else None, "begin": ts, "end": None,
                 "out": list(te.get("flow_ids", [])),
                 "in": [[f, ts] for f in te.get("terminating_flow_ids", [])]}
            stack.append(s)
            procs.setdefault(track_pid.get(track), {"slices": []})["slices"].append(s)
        elif etype == "TYPE_SLICE_END":
            if not stack:
                fail("%s: slice end without begin" % trace)
            s = stack.pop()
            s["end"] = ts
            s["in"] += [[f, s["begin"]] for f in te.get("terminating_flow_ids", [])]
            if te.get("flow_ids"):
                fail("%s: a flow begun on a slice end" % trace)
        elif te.get("flow_ids") or te.get("terminating_flow_ids"):
            if etype != "TYPE_INSTANT" or not stack or te.get("flow_ids"):
                fail("%s: a flow on an event that is no slice, or no arrival inside one" % trace)
            stack[-1]["in"] += [[f, ts] for f in te.get("terminating_flow_ids", [])]
    for track, stack in stacks.items():
        if stack:
            fail("%s: %d slices left open" % (trace, len(stack)))
    return procs


def expected(mode, rounds, size, rank):
    """-> {name: count} of the rank's MPI slices, and its messages out as
    [(call name, its order among calls of that name, to rank, to call, order there)]."""
    c = {"MPI_Init": 1, "MPI_Comm_rank": 1, "MPI_Comm_size": 1, "MPI_Finalize": 1}
    msgs = []
    nxt = (rank + 1) % size
    if mode in ("ring", "fork"):
        n = rounds if mode == "ring" else 1
        c["MPI_Send"] = n
        c["MPI_Recv"] = n
        msgs = [("MPI_Send", k, nxt, "MPI_Recv", k) for k in range(n)]
        if mode == "fork":
            c["MPI_Barrier"] = 1
    elif mode == "exchange":
        c.update({"MPI_Irecv": size - 1, "MPI_Isend": size - 1, "MPI_Waitall": 1})
        peers = [p for p in range(size) if p != rank]
        msgs = [("MPI_Isend", j, p, "MPI_Waitall", 0) for j, p in enumerate(peers)]
    elif mode == "split":  # pairs {0, 2} and {1, 3} of 4 ranks
        c.update({"MPI_Comm_split": 1, "MPI_Comm_free": 1})
        c["MPI_Send" if rank < 2 else "MPI_Recv"] = 1
        msgs = [("MPI_Send", 0, rank + 2, "MPI_Recv", 0)] if rank < 2 else []
    elif mode == "collective":
        c.update({"MPI_Bcast": 1, "MPI_Allreduce": 1, "MPI_Barrier": 1})
    else:
        fail("unknown mode " + mode)
    return c, msgs


def main():
    args = sys.argv[1:]
    apply_tool = skew = merged = None
    if "--merged" in args:
        i = args.index("--merged")
        merged = args[i + 1]
        del args[i:i + 2]
    if "--apply" in args:
        i = args.index("--apply")
        apply_tool = args[i + 1]
        del args[i:i + 2]
    if "--skew" in args:
        i = args.index("--skew")
        r, ns = args[i + 1].split(":")
        skew = (int(r), int(ns))
        del args[i:i + 2]
    proto, mode, rounds, size, dirs = args[0], args[1], int(args[2]), int(args[3]), args[4:]
    ranks = {}
    if merged:  # one trace of every rank, times corrected by xptrace merge
        clocks = {}
        for d in dirs:
            for c in glob.glob(os.path.join(d, "mpi-clock.*")):
                k = read_clock(c)
                clocks[k["rank"]] = k
        for pid, pr in decode(proto, merged).items():
            name = pr.get("name") or ""
            if " rank " not in name:
                continue
            r = int(name.rsplit(" rank ", 1)[1].split("/")[0])
            if name != "mpi_app rank %d/%d" % (r, size) or r not in clocks or r in ranks:
                fail("%s: process %r (pid %s) unexpected" % (merged, name, pid))
            ranks[r] = {"clock": clocks[r], "slices": [s for s in pr["slices"] if s["cat"] == "mpi.api"],
                        "trace": merged}
        dirs = []
    for d in dirs:
        clocks = glob.glob(os.path.join(d, "mpi-clock.*"))
        traces = sorted(glob.glob(os.path.join(d, "trace*.perfetto-trace")))
        if len(clocks) != 1 or len(traces) != 1:
            fail("%s: expected one mpi-clock file and one trace, found %d and %d" %
                 (d, len(clocks), len(traces)))
        clk = read_clock(clocks[0])
        procs = decode(proto, traces[0])
        r = clk["rank"]
        want = "mpi_app rank %d/%d" % (r, size)
        if list(procs) != [clk["pid"]] or procs[clk["pid"]].get("name") != want:
            fail("%s: processes %s, expected %r (pid %d)" %
                 ({k: v.get("name") for k, v in procs.items()}, traces[0], want, clk["pid"]))
        slices = procs[clk["pid"]]["slices"]
        if r in ranks:
            fail("rank %d twice" % r)
        ranks[r] = {"clock": clk, "slices": [s for s in slices if s["cat"] == "mpi.api"],
                    "trace": traces[0]}
    if sorted(ranks) != list(range(size)):
        fail("ranks %s, expected 0..%d" % (sorted(ranks), size - 1))

    if apply_tool:  # every timestamp to rank 0's clock
        for r, info in ranks.items():
            ts = [t for s in info["slices"] for t in (s["begin"], s["end"])]
            ts += [a[1] for s in info["slices"] for a in s["in"]]
            out = subprocess.run([apply_tool, glob.glob(os.path.join(os.path.dirname(info["trace"]),
                                                                     "mpi-clock.*"))[0]],
                                 input="\n".join(map(str, ts)) + "\n", capture_output=True, text=True)
            if out.returncode:
                fail("%s: %s" % (apply_tool, out.stderr))
            fixed = [int(x) for x in out.stdout.split()]
            if len(fixed) != len(ts):
                fail("%s returned %d times for %d" % (apply_tool, len(fixed), len(ts)))
            for k, s in enumerate(info["slices"]):
                s["begin"], s["end"] = fixed[2 * k], fixed[2 * k + 1]
            k = 2 * len(info["slices"])
            for s in info["slices"]:
                for a in s["in"]:
                    a[1] = fixed[k]
                    k += 1

    starts, ends = {}, {}
    for r, info in sorted(ranks.items()):
        seen = {}
        for s in info["slices"]:
            k = seen.get(s["name"], 0)
            seen[s["name"]] = k + 1
            for f in s["out"]:
                if f in starts:
                    fail("flow %d starts twice" % f)
                starts[f] = (r, s["name"], k, s["begin"])
            for f, at in s["in"]:
                if f in ends:
                    fail("flow %d ends twice" % f)
                ends[f] = (r, s["name"], k, at)
        want, _ = expected(mode, rounds, size, r)
        if seen != want:
            fail("rank %d: MPI slices %s, expected %s" % (r, dict(sorted(seen.items())),
                                                         dict(sorted(want.items()))))
    if set(starts) != set(ends):
        fail("flows without both ends: %d starts, %d ends, %d matched" %
             (len(starts), len(ends), len(set(starts) & set(ends))))
    got = sorted((s[0], s[1], s[2], ends[f][0], ends[f][1], ends[f][2]) for f, s in starts.items())
    want = sorted((r, a, k, to, b, m) for r in range(size)
                  for (a, k, to, b, m) in expected(mode, rounds, size, r)[1])
    if got != want:
        fail("flows %s, expected %s" % (got, want))
    backwards = [(f, s, ends[f]) for f, s in starts.items() if s[3] > ends[f][3]]
    if skew:
        r, ns = skew
        clk = ranks[r]["clock"]
        if clk.get("test_offset_ns") != ns:
            fail("rank %d: test_offset_ns %s, expected %d" % (r, clk.get("test_offset_ns"), ns))
        for local, off, rtt in clk["est"]:
            if abs(off + ns) > rtt:
                fail("rank %d: estimated offset %d, expected %d within the round trip %d" %
                     (r, off, -ns, rtt))
        print("check_mpi: rank %d: injected %d ns, estimated %s (round trips %s)" %
              (r, ns, [e[1] for e in clk["est"]], [e[2] for e in clk["est"]]))
        if not apply_tool and not merged and not backwards:
            fail("the injected skew leaves every message in order: the test shows nothing")
    # Every rank runs on this host: one that reads rank 0's very clock (same
    # boot and time namespace, no injected skew on it or on rank 0) says
    # offset 0 instead of an estimate (estimates were off by up to 119 us
    # under TSan, 2026-11-27).
    def estimated(r):
        return r != 0 and skew is not None and skew[0] in (r, 0)
    for r, rk in ranks.items():
        for local, off, rtt in rk["clock"]["est"]:
            if not estimated(r) and off != 0:
                fail("rank %d shares rank 0's clock but has the offset %d" % (r, off))
    if apply_tool or merged:
        # A corrected clock is known within the round trip of its estimate:
        # a message may end up to that much before it starts (206 ns once
        # under a 3.7 us round trip with skew).
        slack = max((e[2] for r, rk in ranks.items() if estimated(r) for e in rk["clock"]["est"]), default=0)
        within = [b for b in backwards if b[1][3] - b[2][3] <= slack]
        backwards = [b for b in backwards if b[1][3] - b[2][3] > slack]
        print("check_mpi: %d message(s) end before they start within the round trip (%d ns)" %
              (len(within), slack))
    if (apply_tool or merged or not skew) and backwards:
        f, s, e = backwards[0]
        fail("%d messages end before they start, e.g. rank %d %s #%d at %d -> rank %d %s #%d at %d" %
             (len(backwards), s[0], s[1], s[2], s[3], e[0], e[1], e[2], e[3]))
    for r in sorted(ranks):
        print("check_mpi: rank %d: %d MPI slices, %d clock estimates" %
              (r, len(ranks[r]["slices"]), len(ranks[r]["clock"]["est"])))
    print("check_mpi: OK: %d ranks, %d messages as flows%s%s" %
          (size, len(starts), " (skew %s)" % (skew,) if skew else "",
           " in the merged trace" if merged else ""))


if __name__ == "__main__":
    main()
