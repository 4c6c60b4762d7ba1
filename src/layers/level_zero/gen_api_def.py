#!/usr/bin/env python3
"""Regenerate src/layers/level_zero/ze_api.def from the installed Level Zero
headers (Debian's libze-dev).

Usage: gen_api_def.py > ze_api.def.body   (then keep the hand-written head
comment of ze_api.def).  Reads the DDI tables of ze_ddi.h (tables and table
order), the callback types and RegisterCallback functions of ze_api.h and
layers/zel_tracing_register_cb.h (which functions are traceable, their
params structs), the prototypes of ze_api.h (argument names) and
ze_callbacks_t (the layout zelTracerSetPrologues reads)."""
import re, subprocess, sys
SOURCE = """
#include <level_zero/ze_ddi.h>
#include <level_zero/layers/zel_tracing_register_cb.h>
"""
pp = subprocess.run(['cc', '-E', '-P', '-x', 'c', '-'], input=SOURCE, capture_output=True,
                    text=True, check=True).stdout
pp = re.sub(r'\s+', ' ', pp)

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

# Tables: getter name -> struct type, in ze_ddi.h order.
tables = re.findall(r'ze_result_t (zeGet(\w+)ProcAddrTable)\( ze_api_version_t version, (ze_\w+_dditable_t)\* pDdiTable \);', pp)
# Callback types: ze_pfn<Name>Cb_t -> params struct.
cbs = dict(re.findall(r'typedef void \( \*ze_pfn(\w+)Cb_t\)\( (\w+)\* params, ze_result_t result, void\* pTracerUserData, void\*\* ppTracerInstanceUserData \);', pp))
# RegisterCallback functions: zelTracer<X>RegisterCallback(.., ze_pfn<Y>Cb_t ..)
regs = re.findall(r'ze_result_t zelTracer(\w+)RegisterCallback\( zel_tracer_handle_t hTracer, zel_tracer_reg_t callback_type, ze_pfn(\w+)Cb_t \w+ \);', pp)
reg_of = {}
for x, y in regs:
    assert x == y, (x, y)
    reg_of[y] = x
lines_t, lines_f = [], []
seen = set()
for getter, tname, stype in tables:
    exp = tname.endswith('Exp')
    body = re.search(r'typedef struct _' + stype + r' \{(.*?)\} ' + stype + ';', pp).group(1)
    members = re.findall(r'ze_pfn(\w+)_t (pfn\w+);', body)
    lines_t.append(f'XPT_ZE_TABLE({tname}, {stype}, {len(members)})')
    for pfntype, member in members:
        fname = 'ze' + pfntype
        if pfntype not in reg_of:
            continue
        assert pfntype not in seen
        seen.add(pfntype)
        dm = re.search(r'ze_result_t ' + fname + r'\( ?(.*?)\);', pp)
        params = dm.group(1).strip()
        ps = [] if params in ('void', '') else split_top(params)
        args = []
        for p in ps:
            am = re.match(r'(.*?)(\w+) ?\[\d*\]$', p)
            if am:
                args.append((am.group(1).strip() + ' *', am.group(2))); continue
            nm = re.match(r'(.*?)(\w+)$', p)
            args.append((nm.group(1).strip(), nm.group(2)))
        a = ''.join(f', ({t}, {n})' for t, n in args)
        lines_f.append(f'XPT_ZE_FN({tname}, {member}, {pfntype}, {cbs[pfntype]}, {len(args)}{a})')
missing = set(reg_of) - seen
if missing:
    print('register callbacks without a table entry:', sorted(missing), file=sys.stderr); sys.exit(1)
# ze_callbacks_t: group -> struct -> members.
cbt = re.search(r'typedef struct _ze_callbacks_t \{(.*?)\} ze_callbacks_t;', pp).group(1)
lines_c = []
for gtype, group in re.findall(r'(ze_\w+_callbacks_t) (\w+);', cbt):
    body = re.search(r'typedef struct _' + gtype + r' \{(.*?)\} ' + gtype + ';', pp).group(1)
    for y, member in re.findall(r'ze_pfn(\w+)Cb_t (\w+);', body):
        lines_c.append(f'XPT_ZE_CB({group}, {member}, {y})')
print('#ifdef XPT_ZE_TABLE')
print('\n'.join(lines_t))
print('#endif')
print('#ifdef XPT_ZE_FN')
print('\n'.join(lines_f))
print('#endif')
print('#ifdef XPT_ZE_CB')
print('\n'.join(lines_c))
print('#endif')
print(f'/* {len(lines_t)} tables, {len(lines_f)} traced functions, {len(lines_c)} in ze_callbacks_t */', file=sys.stderr)
