"""A pyopencl program of known shape for tests/opencl/run_pyopencl.sh:
N launches of one kernel (default 2000), each waited on through its
event, then one read back; prints the checksum and the launch count."""
import sys

import numpy as np
import pyopencl as cl

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
ctx = cl.create_some_context(interactive=False)
queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
prg = cl.Program(ctx, """
__kernel void add_one(__global float *x) { x[get_global_id(0)] += 1.0f; }
""").build()
host = np.zeros(1024, dtype=np.float32)
mf = cl.mem_flags
buf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host)
kernel = prg.add_one
for _ in range(n):
    kernel(queue, host.shape, None, buf).wait()
cl.enqueue_copy(queue, host, buf).wait()
print("launches %d checksum %.0f" % (n, float(host.sum())))
