#!/bin/sh
# The direct path's code must leave vector and x87 registers alone: the
# patched entries' trampolines save only general-purpose registers before
# calling it (fn_tramp.S).  usage: check_gpr_only.sh OBJDUMP LIB FUNCTION CALLS...
# CALLS: how many call instructions FUNCTION may have (indirect only).
objdump=$1 lib=$2 fn=$3 calls=$4
code=$("$objdump" -d --no-show-raw-insn "$lib" | awk -v f="<$fn>:" '$2 == f {on = 1; next} on && /^$/ {exit} on')
[ -n "$code" ] || { echo "check_gpr_only: no $fn in $lib"; exit 1; }
# The instructions alone (no symbol names, no comments): vector or x87
# registers, or an x87/AVX mnemonic (f..., v...).
insns=$(printf '%s\n' "$code" | cut -f2- | sed 's/<[^>]*>//g; s/#.*//')
bad=$(printf '%s\n' "$insns" | grep -E '%[xyz]mm|%st|%mm[0-7]|^ *[fv][a-z]')
[ -z "$bad" ] || { printf 'check_gpr_only: %s uses other registers:\n%s\n' "$fn" "$bad"; exit 1; }
n=$(printf '%s\n' "$code" | grep -c -E '\bcall')
direct=$(printf '%s\n' "$code" | grep -E '\bcall' | grep -v -E 'call[a-z]*[[:space:]]+\*')
[ -z "$direct" ] || { printf 'check_gpr_only: %s calls a function that may use them:\n%s\n' "$fn" "$direct"; exit 1; }
[ "$n" -le "$calls" ] || { echo "check_gpr_only: $fn makes $n calls, at most $calls expected"; exit 1; }
echo "check_gpr_only: $fn: $(printf '%s\n' "$code" | wc -l) instructions, general-purpose registers only, $n indirect call(s)"
