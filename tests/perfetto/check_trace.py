#!/usr/bin/env python3
"""Decode a trace written by libxpti_perfetto.so and check its structure.

  check_trace.py proto PROTO_FILE TRACE [expectations]
  check_trace.py json TRACE [expectations]

Expectations (all optional): --slices N (matched begin/end slices),
--instants N (instants on thread tracks), --nodes N (graph instants),
--flows N (complete flow arrows), --edges N (edge_create records on the
graph track), --min-dropped N, --total N (records: slice begins + ends +
instants + graph nodes + edges + dropped must equal N: the finisher drops
whole slices, counting each half),
--name NAME=COUNT (slices or instants with that name), --threads N,
--clock-samples N (instants named "clock <ns>": each lies between its own
<ns> and the next one's, within 100 us: the TSC-to-ns conversion),
--annotated N (slice begins and instants on thread tracks that carry
annotations), --max-bytes-per-slice X (file size / slices).
Device tracks (named children of the process track, JSON pseudo threads
with a tid >= 2^30): --device-slices N, --device-lanes N, --lanes
PREFIX=N or PREFIX>=N (lanes whose name, without its " #k" lane suffix,
starts with PREFIX), --device-flows N / --min-device-flows N (flows with both ends on
device slices; each must start no later than it ends), --device-min-dur NS
(every device slice lasts at least that), --window START,END (every device
slice lies within, MONOTONIC ns), --any-flow-order (a device flow may end
before it starts), --allow-unmatched (a process killed mid-slice: begins
still open at the end of their track).  Always checked: every track's
slices are properly nested (no end without its begin; JSON ends carry
their begin's name and category), every thread is named, no graph event
on a real thread (JSON tid 0), and every graph edge whose two nodes are in
the trace is a flow from an event of its source node (annotation uid =
the edge's source_uid) to an instant of its target node (uid =
target_uid, edge_uid = the edge), never ending before it starts.
Counters (TrackDescriptor.counter, TYPE_COUNTER events): --counters N
(counter tracks with values), --counter NAME>=N (at least N tracks of that
counter with values), --main-thread NAME (every process's main thread,
tid = pid, is described and named NAME); always checked: a counter track's parent is
a described track, every counter event carries a value, and the counters
that only grow (MONOTONIC_COUNTERS: CPU time, switches, faults, peak RSS,
perf_event totals) never decrease on their track.
Samples (PerfSample packets of `xptrace sample`): every sample's callstack,
frames, function names and mappings resolve on its sequence, its thread
has a descriptor and its process one (when the trace describes
processes); --perf-samples N, --min-perf-samples N, --sample-function
NAME>=PCT (NAME in at least PCT % of the samples' stacks).
Prints a one-line summary; exits 1 with a reason on the first failure."""
import argparse
import json
import os
import re
import subprocess
import sys

MONOTONIC = 3
LANE_TID = 1 << 30  # JSON pseudo threads of device lanes
TID_LIMIT = 1 << 22  # real tids are below (pid_max)
ANY_FLOW_ORDER = "--any-flow-order" in sys.argv
INCREMENTAL_MIN = 64
# counters of xptrace run --counters that never decrease (rss may)
MONOTONIC_COUNTERS = {
    "thread-cpu-time", "thread-context-switches", "thread-page-faults", "peak-rss",
    "task-clock", "context-switches", "cpu-migrations", "page-faults", "minor-faults",
    "major-faults", "cycles", "instructions", "cache-references", "cache-misses", "branches",
    "branch-misses"}


def fail(msg):
    print("check_trace: FAIL: " + msg)
    sys.exit(1)


def unescape(s):
    # protoc prints C-style escapes (octal for non-ASCII bytes).
    return s.encode("latin-1").decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")


def parse_text(text):
    """protoc text output -> nested dicts of lists."""
    root = {}
    stack = [root]
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line == "}":
            stack.pop()
            continue
        m = re.match(r"^([A-Za-z0-9_]+) \{$", line)
        if m:
            key = m.group(1)
            if key[0].isdigit():
                fail("unknown field %s at line %d" % (key, lineno))
            child = {}
            stack[-1].setdefault(key, []).append(child)
            stack.append(child)
            continue
        m = re.match(r"^([A-Za-z0-9_]+): (.*)$", line)
        if not m:
            fail("cannot parse protoc output line %d: %r" % (lineno, line))
        key, value = m.groups()
        if key[0].isdigit():
            fail("unknown field %s at line %d" % (key, lineno))
        if value.startswith('"'):
            value = unescape(value[1:-1])
        elif re.match(r"^-?\d+$", value):
            value = int(value)
        stack[-1].setdefault(key, []).append(value)
    return root


def one(d, key, default=None):
    v = d.get(key)
    return v[0] if v else default


class Summary:
    def __init__(self):
        self.slices = 0
        self.instants = 0
        self.nodes = 0
        self.flows = 0
        self.begins = 0
        self.ends = 0
        self.unmatched = 0  # ends without a begin
        self.open = 0  # begins still open at the end
        self.edges = 0
        self.graph = []  # graph events: dicts name, ts, idx, anns, out, in
        self.dropped = 0
        self.names = {}
        self.threads = set()
        self.process_uuid = {}
        self.thread_uuid = {}
        self.thread_parents = []
        self.active_threads = None  # proto: thread tracks with events (every thread has a track)
        self.thread_names = {}  # (pid, tid) -> name
        self.clock = []  # (sent ns, recorded ns) of "clock <ns>" instants
        self.annotated = 0
        self.dev_slices = []  # (lane name, begin, end)
        self.lanes = {}  # lane key -> name
        self.dev_flows = 0
        self.counters = {}  # counter track uuid -> [(ts, value)]
        self.counter_names = {}  # counter track uuid -> name
        self.processes = {}  # pid -> process name
        self.cross_flows = 0  # flows between tracks of two processes
        self.perf_samples = 0
        self.sample_threads = set()
        self.sample_incl = {}  # function name -> samples with it in their stack

    def name(self, n):
        self.names[n] = self.names.get(n, 0) + 1


def annotations(te, names):
    """A track event's debug annotations: name -> value."""
    out = {}
    for a in te.get("debug_annotations", []):
        n = one(a, "name")
        if n is None:
            n = names.get(one(a, "name_iid"))
        for k in ("uint_value", "int_value", "string_value", "bool_value", "double_value"):
            if k in a:
                out[n] = one(a, k)
    return out


def check_graph(s, starts):
    """Every edge whose nodes are both in the trace is a flow from its
    source node to an instant of its target node, in time order.
    starts: flow id -> the graph event it starts on."""
    nodes = set()
    for g in s.graph:
        if "edge_uid" not in g["anns"] and not ("source_uid" in g["anns"] and
                                                 "target_uid" in g["anns"]):
            if "uid" in g["anns"]:
                nodes.add(g["anns"]["uid"])
    for g in s.graph:
        a = g["anns"]
        if "edge_uid" in a:
            s.edges += 1
            if a.get("uid") != a.get("target_uid"):
                fail("edge %s drawn on %r (uid %s), not on its target %s" %
                     (a["edge_uid"], g["name"], a.get("uid"), a.get("target_uid")))
            if len(g["in"]) != 1:
                fail("edge %s ends %d flows" % (a["edge_uid"], len(g["in"])))
            f = g["in"][0]
            src = starts.get(f)
            if src is None:
                fail("edge %s: flow %s has no start" % (a["edge_uid"], f))
            if src["anns"].get("uid") != a.get("source_uid"):
                fail("edge %s: flow starts on %r (uid %s), not on its source %s" %
                     (a["edge_uid"], src["name"], src["anns"].get("uid"), a.get("source_uid")))
            if (src["ts"], src["idx"]) >= (g["ts"], g["idx"]):
                fail("edge %s: flow from %r at %d does not precede its end at %d" %
                     (a["edge_uid"], src["name"], src["ts"], g["ts"]))
        elif "source_uid" in a and "target_uid" in a:
            s.edges += 1
            if a["source_uid"] in nodes and a["target_uid"] in nodes:
                fail("edge %s (%r) between two nodes of the trace is not a flow" %
                     (a.get("uid"), g["name"]))
    for g in s.graph:
        if g["in"] and "edge_uid" not in g["anns"]:
            fail("graph event %r ends a flow but is no edge" % g["name"])


PROFILE_TABLES = ("function_names", "frames", "callstacks", "mappings", "mapping_paths", "build_ids")


def intern_profile(st, interned):
    """Interned callstacks of samples, by table and iid."""
    for key in PROFILE_TABLES:
        table = st.setdefault("prof_" + key, {})
        for e in interned.get(key, []):
            iid = one(e, "iid")
            if not iid:
                fail("interned %s with iid 0" % key)
            if iid in table and table[iid] != e:
                fail("interned %s iid %d redefined" % (key, iid))
            table[iid] = e


def check_perf_sample(s, st, ps, p, i):
    """A PerfSample: pid, tid, a MONOTONIC time, and a callstack whose
    frames, function names and mappings all resolve on its sequence."""
    if "timestamp" not in p or one(p, "timestamp_clock_id", st["clock"]) not in (None, MONOTONIC):
        fail("sample in packet %d without a MONOTONIC timestamp" % i)
    if not one(ps, "pid") or not one(ps, "tid"):
        fail("sample in packet %d without pid/tid" % i)
    iid = one(ps, "callstack_iid")
    cs = st.get("prof_callstacks", {}).get(iid)
    if cs is None:
        fail("sample in packet %d: callstack %s not interned" % (i, iid))
    names = []
    for fid in cs.get("frame_ids", []):
        fr = st.get("prof_frames", {}).get(fid)
        if fr is None:
            fail("callstack %d: frame %d not interned" % (iid, fid))
        fn = st.get("prof_function_names", {}).get(one(fr, "function_name_id"))
        if fn is None:
            fail("frame %d: function name %s not interned" % (fid, one(fr, "function_name_id")))
        m = one(fr, "mapping_id")
        if m:
            mp = st.get("prof_mappings", {}).get(m)
            if mp is None:
                fail("frame %d: mapping %d not interned" % (fid, m))
            for pid in mp.get("path_string_ids", []):
                if pid not in st.get("prof_mapping_paths", {}):
                    fail("mapping %d: path part %d not interned" % (m, pid))
            if "rel_pc" not in fr:
                fail("frame %d has a mapping but no rel_pc" % fid)
        names.append(one(fn, "str"))
    if not names:
        fail("sample in packet %d: empty callstack" % i)
    s.perf_samples += 1
    s.sample_threads.add((one(ps, "pid"), one(ps, "tid")))
    for n in set(names):
        s.sample_incl[n] = s.sample_incl.get(n, 0) + 1


def check_samples(s, a):
    if a.perf_samples is not None and s.perf_samples != a.perf_samples:
        fail("expected %d samples, found %d" % (a.perf_samples, s.perf_samples))
    if a.min_perf_samples is not None and s.perf_samples < a.min_perf_samples:
        fail("expected at least %d samples, found %d" % (a.min_perf_samples, s.perf_samples))
    for pid, tid in s.sample_threads:
        if (pid, tid) not in s.threads:
            fail("samples of thread %d (pid %d) without its thread descriptor" % (tid, pid))
        if s.processes and pid not in s.processes:
            fail("samples of pid %d, a process with no descriptor" % pid)
    for spec in a.sample_function:
        n, pct = spec.rsplit(">=", 1)
        got = 100.0 * s.sample_incl.get(n, 0) / max(s.perf_samples, 1)
        if got < float(pct):
            fail("function %s in %.1f%% of the samples, expected >= %s" % (n, got, pct))


def check_proto(proto_file, trace, args):
    out = subprocess.run(["protoc", "--decode=perfetto.protos.Trace", "-I", proto_file.rsplit("/", 1)[0],
                          proto_file], stdin=open(trace, "rb"), capture_output=True)
    if out.returncode != 0:
        fail("protoc --decode failed: " + out.stderr.decode(errors="replace"))
    root = parse_text(out.stdout.decode("utf-8", "replace"))
    packets = root.get("packet", [])
    if not packets:
        fail("no packets")
    s = Summary()
    s.active_threads = set()
    seqs = {}
    tracks = {}
    stacks = {}
    last_ts = {}
    flow_starts = {}
    flow_ends = {}
    flow_at = {}
    graph_starts = {}
    seq_pids = {}  # sequence -> pids of the tracks it writes on (one, for a process)
    last_global_snapshot = None
    for i, p in enumerate(packets):
        seq_id = one(p, "trusted_packet_sequence_id", 0)
        if not seq_id:
            fail("packet %d has no trusted_packet_sequence_id" % i)
        flags = one(p, "sequence_flags", 0)
        st = seqs.get(seq_id)
        if st is None:
            if not flags & 1:
                fail("first packet of sequence %d lacks SEQ_INCREMENTAL_STATE_CLEARED" % seq_id)
            st = seqs[seq_id] = {"names": {}, "cats": {}, "anns": {}, "clock": None,
                                 "track": None, "inc": None}
        d = one(p, "trace_packet_defaults")
        if d:
            st["clock"] = one(d, "timestamp_clock_id")
            ted = one(d, "track_event_defaults")
            if ted:
                st["track"] = one(ted, "track_uuid")
        cs = one(p, "clock_snapshot")
        if cs:
            clocks = {one(c, "clock_id"): c for c in cs.get("clocks", [])}
            if all(cid < INCREMENTAL_MIN for cid in clocks) and MONOTONIC in clocks:
                # Perfetto wants the snapshots of one clock set in time order
                mono = one(clocks[MONOTONIC], "timestamp")
                if last_global_snapshot is not None and mono < last_global_snapshot:
                    fail("global clock snapshot of packet %d goes back in time" % i)
                last_global_snapshot = mono
            for cid, c in clocks.items():
                if cid >= INCREMENTAL_MIN:
                    if MONOTONIC not in clocks:
                        fail("sequence clock %d not anchored to MONOTONIC" % cid)
                    # value of the incremental clock, and its MONOTONIC origin
                    st["inc"] = [one(c, "timestamp"), one(clocks[MONOTONIC], "timestamp") - one(c, "timestamp")]
        interned = one(p, "interned_data")
        # Later packets may omit sequence_flags: the trace processor keeps a
        # sequence's interned data and defaults whatever the flags say (the
        # NEEDS flag only skips packets while the state is invalid).
        if interned:
            for key, table in (("event_names", "names"), ("event_categories", "cats"),
                               ("debug_annotation_names", "anns")):
                for e in interned.get(key, []):
                    iid = one(e, "iid")
                    if not iid:
                        fail("interned %s with iid 0" % key)
                    st[table][iid] = one(e, "name")
        if interned:
            intern_profile(st, interned)
        ps = one(p, "perf_sample")
        if ps:
            check_perf_sample(s, st, ps, p, i)
            continue
        td = one(p, "track_descriptor")
        if td:
            uuid = one(td, "uuid")
            if not uuid:
                fail("track descriptor without uuid")
            tracks[uuid] = td
            pr = one(td, "process")
            if pr:
                pid = one(pr, "pid")
                if pid in s.processes and s.processes[pid] != one(pr, "process_name"):
                    fail("pid %s names two processes: %r, %r" % (pid, s.processes[pid],
                                                                 one(pr, "process_name")))
                s.processes[pid] = one(pr, "process_name")
                # Perfetto makes a process of each process track: one per pid
                if s.process_uuid.setdefault(pid, uuid) != uuid:
                    fail("pid %s has two process tracks (%s, %s)" % (pid, s.process_uuid[pid], uuid))
            seq_pids.setdefault(seq_id, set()).add(track_pid(tracks, uuid))
            th = one(td, "thread")
            if th:
                key = (one(th, "pid"), one(th, "tid"))
                # one thread track per thread, under its process's track
                if s.thread_uuid.setdefault(key, uuid) != uuid:
                    fail("thread %s of pid %s has two thread tracks" % (key[1], key[0]))
                s.thread_parents.append((key, one(td, "parent_uuid")))
                s.threads.add(key)
                s.thread_names[(one(th, "pid"), one(th, "tid"))] = one(th, "thread_name")
                if not one(th, "thread_name"):
                    fail("thread %s has no name" % one(th, "tid"))
        # timestamp in MONOTONIC ns
        ts = None
        if "timestamp" in p:
            clock = one(p, "timestamp_clock_id", st["clock"])
            raw = one(p, "timestamp")
            if clock is None or clock == MONOTONIC:
                ts = raw
            elif clock >= INCREMENTAL_MIN:
                if st["inc"] is None:
                    fail("packet %d uses clock %d before its snapshot" % (i, clock))
                st["inc"][0] += raw
                ts = st["inc"][0] + st["inc"][1]
            else:
                fail("unexpected clock %s" % clock)
        te = one(p, "track_event")
        if not te:
            continue
        if ts is None:
            fail("track event without timestamp in packet %d" % i)
        track = one(te, "track_uuid", st["track"])
        if track not in tracks:
            fail("track %s used before its descriptor" % track)
        if ts < last_ts.get(track, 0):
            fail("timestamps go back on track %s (%d < %d)" % (track, ts, last_ts[track]))
        last_ts[track] = ts
        etype = one(te, "type")
        if etype == "TYPE_COUNTER":
            check_counter_event(s, tracks, track, ts, te)
            continue
        name = None
        if "name_iid" in te:
            iid = one(te, "name_iid")
            if iid not in st["names"]:
                fail("name iid %d not interned before use (sequence %d)" % (iid, seq_id))
            name = st["names"][iid]
        elif "name" in te:
            name = one(te, "name")
        for iid in te.get("category_iids", []):
            if iid not in st["cats"]:
                fail("category iid %d not interned before use" % iid)
        for a in te.get("debug_annotations", []):
            if "name_iid" in a and one(a, "name_iid") not in st["anns"]:
                fail("annotation name iid %d not interned before use" % one(a, "name_iid"))
        for f in te.get("flow_ids", []):
            flow_starts[f] = flow_starts.get(f, 0) + 1
        for f in te.get("terminating_flow_ids", []):
            flow_ends[f] = flow_ends.get(f, 0) + 1
        tdesc = tracks[track]
        if "thread" in tdesc:
            th = one(tdesc, "thread")
            s.active_threads.add((one(th, "pid"), one(th, "tid")))
        is_lane = "thread" not in tdesc and "process" not in tdesc and \
            "counter" not in tdesc and \
            one(tdesc, "name") not in (None, "graph") and "parent_uuid" in tdesc
        if is_lane:
            s.lanes[track] = one(tdesc, "name")
        pid = track_pid(tracks, track)
        seq_pids.setdefault(seq_id, set()).add(pid)
        for f in te.get("flow_ids", []):
            flow_at.setdefault(f, [None, None])[0] = (is_lane, ts, pid)
        for f in te.get("terminating_flow_ids", []):
            flow_at.setdefault(f, [None, None])[1] = (is_lane, ts, pid)
        if one(tdesc, "name") == "graph" and "parent_uuid" in tdesc:
            g = {"name": name, "ts": ts, "idx": i, "anns": annotations(te, st["anns"]),
                 "out": te.get("flow_ids", []), "in": te.get("terminating_flow_ids", [])}
            s.graph.append(g)
            for f in g["out"]:
                graph_starts[f] = g
        stack = stacks.setdefault(track, [])
        if etype in ("TYPE_SLICE_BEGIN", "TYPE_INSTANT") and te.get("debug_annotations") and \
                name != "xptrace: dropped events" and one(tracks[track], "name") != "graph":
            s.annotated += 1
        if etype == "TYPE_SLICE_BEGIN":
            if name is None:
                fail("slice begin without a name")
            s.begins += 1
            stack.append((name, ts))
        elif etype == "TYPE_SLICE_END":
            s.ends += 1
            if not stack:
                s.unmatched += 1
            else:
                s.slices += 1
                sname, begin = stack.pop()
                s.name(sname)
                if is_lane:
                    s.dev_slices.append((s.lanes[track], begin, ts))
        elif etype == "TYPE_INSTANT":
            if name is None:
                fail("instant without a name")
            if name == "xptrace: dropped events":
                for a in te.get("debug_annotations", []):
                    if one(a, "name") == "dropped":
                        s.dropped = max(s.dropped, one(a, "uint_value", 0))
                continue
            if name.startswith("clock "):
                s.clock.append((int(name[6:]), ts))
            if one(tracks[track], "name") == "graph":
                a = s.graph[-1]["anns"]
                if "edge_uid" in a or ("source_uid" in a and "target_uid" in a):
                    continue  # an edge (check_graph counts them)
                s.nodes += 1
            else:
                s.instants += 1
            s.name(name)
        else:
            fail("unexpected event type %s" % etype)
    for f, n in flow_starts.items():
        if flow_ends.get(f) == 1 and n == 1:
            s.flows += 1
        else:
            fail("flow %d has %d starts and %s ends" % (f, n, flow_ends.get(f)))
    for f in flow_ends:
        if f not in flow_starts:
            fail("flow %d ends without a start" % f)
    count_device_flows(s, flow_at)
    for start, end in flow_at.values():
        if start and end and start[2] != end[2]:
            s.cross_flows += 1
    for seq_id, pids in seq_pids.items():
        if len(pids - {None}) > 1:
            fail("sequence %d writes on tracks of processes %s" % (seq_id, sorted(pids - {None})))
    check_graph(s, graph_starts)
    known = set(s.process_uuid.values())
    for key, parent in s.thread_parents:
        if parent is not None and parent not in known:
            fail("thread %s of pid %s hangs under no process track (%s)" % (key[1], key[0], parent))
    s.open += sum(len(v) for v in stacks.values())
    return s


def check_counter_event(s, tracks, track, ts, te):
    tdesc = tracks[track]
    if "counter" not in tdesc:
        fail("counter event on track %s, which is no counter track" % track)
    parent = one(tdesc, "parent_uuid")
    if parent is not None and parent not in tracks:
        fail("counter track %r: parent %s not described before" % (one(tdesc, "name"), parent))
    if "counter_value" in te:
        v = one(te, "counter_value")
    elif "double_counter_value" in te:
        v = float(one(te, "double_counter_value"))
    else:
        fail("counter event without a value on %r" % one(tdesc, "name"))
    vals = s.counters.setdefault(track, [])
    name = one(tdesc, "name")
    s.counter_names[track] = name
    if vals and name in MONOTONIC_COUNTERS and v < vals[-1][1]:
        fail("counter %r (track %s) decreases: %s after %s" % (name, track, v, vals[-1][1]))
    vals.append((ts, v))


def track_pid(tracks, uuid):
    """The pid a track belongs to: its own, or its parent's."""
    seen = set()
    while uuid in tracks and uuid not in seen:
        seen.add(uuid)
        td = tracks[uuid]
        for k in ("thread", "process"):
            d = one(td, k)
            if d and one(d, "pid") is not None:
                return one(d, "pid")
        uuid = one(td, "parent_uuid")
    return None


def count_device_flows(s, flow_at):
    for f, (start, end) in flow_at.items():
        if start and end and start[0] and end[0]:
            if start[1] > end[1] and not ANY_FLOW_ORDER:
                fail("device flow %s starts at %d, after its end at %d" % (f, start[1], end[1]))
            s.dev_flows += 1


def check_json(trace, args):
    with open(trace) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    s = Summary()
    s.active_threads = set()
    stacks = {}
    last_ts = {}
    thread_names = {}
    starts = {}
    ends = {}
    flow_at = {}
    x_stacks = {}
    graph_starts = {}
    last_graph = None
    for idx, e in enumerate(events):
        ph = e["ph"]
        key = (e["pid"], e["tid"])
        if e["tid"] == 0:
            fail("an event on tid 0 (importers fold it into the main thread): %s" % e)
        if ph == "M":
            if e["name"] == "thread_name":
                thread_names[key] = e["args"]["name"]
                if e["tid"] >= LANE_TID:
                    s.lanes[key] = e["args"]["name"]
                elif e["tid"] < TID_LIMIT:
                    s.threads.add(key)
                    s.thread_names[key] = e["args"]["name"]
            continue
        if e["tid"] < TID_LIMIT and ph in "BEi":
            s.active_threads.add(key)
        if e["tid"] < TID_LIMIT and ph in "BEi" and key not in thread_names and \
                e.get("s") != "p":
            fail("thread %s has no thread_name before its first event" % e["tid"])
        is_graph = thread_names.get(key) == "graph" and TID_LIMIT <= e["tid"] < LANE_TID
        ts = float(e["ts"])
        is_lane = e["tid"] >= LANE_TID
        if ph in "sf":
            flow_at.setdefault(e["id"], [None, None])[0 if ph == "s" else 1] = \
                (is_lane, round(ts * 1000))
            if is_graph:
                # a graph flow event follows the graph event it binds to
                if last_graph is None or last_graph["key"] != key or last_graph["ts"] != ts:
                    fail("graph flow %s at %s follows no graph event of its time" % (e["id"], ts))
                if ph == "s":
                    last_graph["out"].append(e["id"])
                    graph_starts[e["id"]] = last_graph
                else:
                    last_graph["in"].append(e["id"])
        if ph in "BEiX":
            if ts < last_ts.get(key, 0):
                fail("timestamps go back on %s" % (key,))
            last_ts[key] = ts
        stack = stacks.setdefault(key, [])
        if ph in "Bi" and e.get("args") and e["name"] != "xptrace: dropped events":
            s.annotated += 1
        if ph == "B":
            s.begins += 1
            stack.append((e["name"], e.get("cat")))
        elif ph == "E":
            s.ends += 1
            if not stack:
                s.unmatched += 1
            else:
                s.slices += 1
                bname, bcat = stack.pop()
                if e.get("name") != bname or e.get("cat") != bcat:
                    fail("end %r/%r of slice %r/%r on %s" % (e.get("name"), e.get("cat"),
                                                            bname, bcat, key))
                s.name(bname)
        elif ph == "i":
            if e["name"] == "xptrace: dropped events":
                s.dropped = max(s.dropped, e["args"]["dropped"])
                continue
            s.instants += 1
            s.name(e["name"])
            if e["name"].startswith("clock "):
                s.clock.append((int(e["name"][6:]), round(ts * 1000)))
        elif ph == "X" and is_lane:
            if key not in s.lanes:
                fail("device slice on %s before its lane's name" % (key,))
            begin = round(ts * 1000)
            end = begin + round(float(e["dur"]) * 1000)
            # properly nested: pop what ended, then fit inside the enclosing one
            lane_stack = x_stacks.setdefault(key, [])
            while lane_stack and lane_stack[-1] <= begin:
                lane_stack.pop()
            if lane_stack and end > lane_stack[-1]:
                fail("device slice %s [%d, %d] overlaps its lane's enclosing slice" %
                     (e["name"], begin, end))
            lane_stack.append(end)
            s.slices += 1
            s.name(e["name"])
            s.dev_slices.append((s.lanes[key], begin, end))
        elif ph == "X":
            if not is_graph:
                fail("X event %r on %s, neither a lane nor the graph" % (e["name"], key))
            last_graph = {"key": key, "name": e["name"], "ts": ts, "idx": idx,
                          "anns": e.get("args", {}), "out": [], "in": []}
            s.graph.append(last_graph)
            a = last_graph["anns"]
            if "edge_uid" in a or ("source_uid" in a and "target_uid" in a):
                continue
            s.nodes += 1
            s.name(e["name"])
        elif ph == "s":
            starts[e["id"]] = starts.get(e["id"], 0) + 1
        elif ph == "f":
            ends[e["id"]] = ends.get(e["id"], 0) + 1
        else:
            fail("unexpected phase %s" % ph)
    for f, n in starts.items():
        if n != 1 or ends.get(f) != 1:
            fail("flow %s unbalanced" % f)
        s.flows += 1
    count_device_flows(s, flow_at)
    check_graph(s, graph_starts)
    known = set(s.process_uuid.values())
    for key, parent in s.thread_parents:
        if parent is not None and parent not in known:
            fail("thread %s of pid %s hangs under no process track (%s)" % (key[1], key[0], parent))
    s.open += sum(len(v) for v in stacks.values())
    return s


def check_clock(samples, want):
    if len(samples) != want:
        fail("expected %d clock samples, found %d" % (want, len(samples)))
    samples.sort()
    tol = 100000
    for i, (sent, got) in enumerate(samples):
        upper = samples[i + 1][0] if i + 1 < len(samples) else None
        if got < sent - tol or (upper is not None and got > upper + tol):
            fail("clock sample %d: sent at %d ns, recorded at %d ns (next sent at %s)" %
                 (i, sent, got, upper))
    print("check_trace: %d clock samples within 100 us" % want)


def lane_base(name):
    m = re.match(r"^(.*) #(\d+)$", name)
    return m.group(1) if m else name


def check_device(s, a):
    print("check_trace: device slices=%d lanes=%d device flows=%d" %
          (len(s.dev_slices), len(s.lanes), s.dev_flows))
    # every lane's slices: extra lanes of a track are numbered from #2 on
    bases = {}
    for name in s.lanes.values():
        m = re.match(r"^(.*) #(\d+)$", name)
        bases.setdefault(m.group(1) if m else name, []).append(int(m.group(2)) if m else 1)
    for base, nums in bases.items():
        if sorted(nums) != list(range(1, len(nums) + 1)):
            fail("lanes of %r are numbered %s" % (base, sorted(nums)))
    if a.device_slices is not None and len(s.dev_slices) != a.device_slices:
        fail("expected %d device slices, found %d" % (a.device_slices, len(s.dev_slices)))
    if a.device_lanes is not None and len(s.lanes) != a.device_lanes:
        fail("expected %d device lanes, found %d (%s)" % (a.device_lanes, len(s.lanes),
                                                           sorted(s.lanes.values())))
    if a.device_flows is not None and s.dev_flows != a.device_flows:
        fail("expected %d device flows, found %d" % (a.device_flows, s.dev_flows))
    if a.min_device_flows is not None and s.dev_flows < a.min_device_flows:
        fail("expected at least %d device flows, found %d" % (a.min_device_flows, s.dev_flows))
    for spec in a.lanes:
        prefix, want = spec.rsplit("=", 1)
        at_least = prefix.endswith(">")
        prefix = prefix.rstrip(">")
        got = sum(1 for n in s.lanes.values() if lane_base(n).startswith(prefix))
        if got < int(want) if at_least else got != int(want):
            fail("expected %s lanes named %r..., found %d (%s)" % (want, prefix, got,
                                                                 sorted(s.lanes.values())))
    for lane, begin, end in s.dev_slices:
        if a.device_min_dur is not None and end - begin < a.device_min_dur:
            fail("device slice on %r lasts %d ns, expected at least %d" %
                 (lane, end - begin, a.device_min_dur))
        if a.window:
            lo, hi = (int(x) for x in a.window.split(","))
            if begin < lo or end > hi:
                fail("device slice on %r [%d, %d] outside the run [%d, %d]" %
                     (lane, begin, end, lo, hi))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("format", choices=["proto", "json"])
    ap.add_argument("files", nargs="+")
    for opt in ("slices", "instants", "nodes", "edges", "flows", "min_dropped", "total", "threads",
                "clock_samples", "annotated", "device_slices", "device_lanes", "device_flows",
                "min_device_flows", "device_min_dur", "counters", "perf_samples",
                "min_perf_samples"):
        ap.add_argument("--" + opt.replace("_", "-"), type=int)
    ap.add_argument("--max-bytes-per-slice", type=float)
    ap.add_argument("--name", action="append", default=[])
    ap.add_argument("--lanes", action="append", default=[])
    ap.add_argument("--sample-function", action="append", default=[])
    ap.add_argument("--window")
    ap.add_argument("--any-flow-order", action="store_true")
    ap.add_argument("--allow-unmatched", action="store_true")
    ap.add_argument("--processes", type=int)
    ap.add_argument("--process-name", action="append", default=[])
    ap.add_argument("--cross-flows", type=int)
    ap.add_argument("--counter", action="append", default=[])
    ap.add_argument("--main-thread")
    a = ap.parse_args()
    if a.format == "proto":
        if len(a.files) != 2:
            fail("proto needs PROTO_FILE TRACE")
        s = check_proto(a.files[0], a.files[1], a)
    else:
        s = check_json(a.files[0], a)
    print("check_trace: slices=%d instants=%d nodes=%d edges=%d flows=%d begins=%d ends=%d "
          "unmatched=%d open=%d dropped=%d threads=%d counters=%d" %
          (s.slices, s.instants, s.nodes, s.edges, s.flows, s.begins, s.ends, s.unmatched,
           s.open, s.dropped, len(s.threads if s.active_threads is None else s.active_threads),
           len(s.counters)))
    if a.counters is not None and len(s.counters) != a.counters:
        fail("expected %d counter tracks, found %d" % (a.counters, len(s.counters)))
    for spec in a.counter:
        n, c = spec.rsplit(">=", 1)
        got = sum(1 for t, v in s.counters.items() if v and s.counter_names.get(t) == n)
        if got < int(c):
            fail("expected at least %s counter tracks %r with values, found %d" % (c, n, got))
    if s.perf_samples:
        print("check_trace: perf_samples=%d" % s.perf_samples)
    if s.unmatched:
        fail("%d slice ends without their begin" % s.unmatched)
    if s.open and not a.allow_unmatched:
        fail("%d slice begins without their end" % s.open)
    for opt in ("slices", "instants", "nodes", "edges", "flows", "threads", "annotated"):
        want = getattr(a, opt)
        got = getattr(s, opt) if opt != "threads" else \
            len(s.threads if s.active_threads is None else s.active_threads)
        if want is not None and want != got:
            fail("expected %d %s, found %d" % (want, opt, got))
    if a.min_dropped is not None and s.dropped < a.min_dropped:
        fail("expected at least %d dropped events recorded in the trace, found %d" %
             (a.min_dropped, s.dropped))
    if a.total is not None:
        got = s.begins + s.ends + s.instants + s.nodes + s.edges + s.dropped
        if got != a.total:
            fail("recorded + dropped = %d, expected %d" % (got, a.total))
    if a.max_bytes_per_slice is not None:
        size = os.path.getsize(a.files[-1])
        per = size / max(s.slices, 1)
        print("check_trace: %.2f bytes per slice" % per)
        if per > a.max_bytes_per_slice:
            fail("%.2f bytes per slice, expected at most %.2f" % (per, a.max_bytes_per_slice))
    if a.clock_samples is not None:
        check_clock(s.clock, a.clock_samples)
    check_device(s, a)
    if s.processes:
        print("check_trace: processes=%d (%s) cross-process flows=%d" % (
            len(s.processes), ", ".join("%s %s" % (n, p) for p, n in sorted(s.processes.items())),
            s.cross_flows))
    if a.processes is not None and len(s.processes) != a.processes:
        fail("expected %d processes, found %d" % (a.processes, len(s.processes)))
    if a.cross_flows is not None and s.cross_flows != a.cross_flows:
        fail("expected %d flows between processes, found %d" % (a.cross_flows, s.cross_flows))
    for spec in a.process_name:
        n, c = spec.rsplit("=", 1)
        got = sum(1 for v in s.processes.values() if v == n)
        if got != int(c):
            fail("expected %s processes named %r, found %d" % (c, n, got))
    check_samples(s, a)
    if a.main_thread is not None:
        mains = {k: v for k, v in s.thread_names.items() if k[0] == k[1]}
        if not mains or any(v != a.main_thread for v in mains.values()):
            fail("main threads named %s, expected %r" % (mains, a.main_thread))
    for spec in a.name:
        n, c = spec.rsplit("=", 1)
        if s.names.get(n, 0) != int(c):
            fail("expected %s x%s, found %d" % (n, c, s.names.get(n, 0)))
    print("check_trace: OK")


if __name__ == "__main__":
    main()
