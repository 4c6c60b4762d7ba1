#!/usr/bin/env python3
"""Regenerate include/xptrace/cl_api.def from the installed Khronos headers.

Usage: gen_api_def.py > cl_api.def.body   (then keep the hand-written head
comment of cl_api.def).  Reads struct _cl_icd_dispatch for the order and
the prototypes of cl.h, cl_ext.h, cl_gl.h and cl_egl.h for the arguments."""
import re, subprocess, sys
SOURCE = """
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_0_APIS
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_2_0_APIS
#define CL_USE_DEPRECATED_OPENCL_2_1_APIS
#define CL_USE_DEPRECATED_OPENCL_2_2_APIS
#include <CL/cl_icd.h>
#include <CL/cl_ext.h>
#include <CL/cl_gl.h>
#include <CL/cl_egl.h>
"""
pp = subprocess.run(['cc', '-E', '-P', '-x', 'c', '-'], input=SOURCE, capture_output=True,
                    text=True, check=True).stdout
pp = re.sub(r'\s+', ' ', pp)
m = re.search(r'typedef struct _cl_icd_dispatch \{(.*?)\} cl_icd_dispatch;', pp)
members = re.findall(r'cl_api_(\w+) (\w+);', m.group(1))
opaque = set(re.findall(r'typedef void \*cl_api_(\w+);', pp))
def split_top(s):
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch == '(': depth += 1
        if ch == ')': depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur.strip()); cur = ''
        else: cur += ch
    if cur.strip(): out.append(cur.strip())
    return out
cbtypes = []
lines = []
maxn = 0
for tname, name in members:
    assert tname == name
    if name in opaque:
        lines.append(f'XPT_CL_OPAQUE({name})'); continue
    # find declaration: "<ret> NAME(" preceded by extern
    dm = re.search(r'extern ([^;]*?)\b' + name + r' ?\((.*?)\) ?;', pp)
    if not dm:
        print('missing', name, file=sys.stderr); sys.exit(1)
    ret = dm.group(1)
    ret = ret.split(' extern ')[-1].strip()
    ret = re.sub(r'__attribute__ ?\(\(.*?\)\) ?', '', ret).strip()
    params = dm.group(2)
    # grab balanced params: re non-greedy may cut at inner ')': redo by scanning
    start = dm.start(2)
    depth = 1; i = start
    while depth:
        if pp[i] == '(': depth += 1
        elif pp[i] == ')': depth -= 1
        i += 1
    params = pp[start:i-1].strip()
    ps = [] if params in ('void', '') else split_top(params)
    args = []
    for p in ps:
        p = re.sub(r'__attribute__ ?\(\(.*?\)\) ?', '', p).strip()
        fm = re.match(r'(.*?)\( ?\* ?(\w+) ?\) ?\((.*)\)$', p)
        if fm:
            cbret, pname, cbargs = fm.group(1).strip(), fm.group(2), fm.group(3)
            td = f'xpt_cl_{name}_{pname}_t'
            cbtypes.append(f'XPT_CL_CALLBACK_TYPE({td}, {cbret}, ({cbargs}))')
            args.append((td, pname)); continue
        am = re.match(r'(.*?)(\w+) ?\[\d*\]$', p)
        if am:
            args.append((am.group(1).strip() + ' *', am.group(2))); continue
        nm = re.match(r'(.*?)(\w+)$', p)
        t = nm.group(1).strip()
        args.append((t, nm.group(2)))
    maxn = max(maxn, len(args))
    a = ''.join(f', ({t}, {n})' for t, n in args)
    if ret == 'void':
        lines.append(f'XPT_CL_FN_VOID({name}, {len(args)}{a})')
    else:
        lines.append(f'XPT_CL_FN({ret}, {name}, {len(args)}{a})')
print(f'/* max args {maxn} */', file=sys.stderr)
print('#ifdef XPT_CL_CALLBACK_TYPE')
print('\n'.join(cbtypes))
print('#endif')
print('#if defined(XPT_CL_FN) && defined(XPT_CL_FN_VOID) && defined(XPT_CL_OPAQUE)')
print('\n'.join(lines))
print('#endif')
