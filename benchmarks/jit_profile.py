"""Instruction-level profile of one replayed CPU task: callgrind's per-instruction counts laid
over the task's machine code, and the code's cost split into what it computes and what it only
moves (spills, reloads, stack-slot copies).

    # a replay under callgrind (kernel_replay.py: x86-64-v3 object, the last launch only)
    SPIRAD_CPU_TARGET=x86-64-v3 PYTHONPATH=$PWD python benchmarks/kernel_replay.py run CAP.pkl \\
        --recompile --repeat 3 --blob-out /tmp/t.blob
    PYTHONPATH=$PWD valgrind --tool=callgrind --dump-instr=yes --instr-atstart=no \\
        --callgrind-out-file=/tmp/cg python benchmarks/kernel_replay.py run CAP.pkl \\
        --blob /tmp/t.blob --repeat 3 --toggle > /tmp/replay.log
    python benchmarks/jit_profile.py /tmp/cg.1 --blob /tmp/t.blob --log /tmp/replay.log [--top 30]

The task's address comes from the replay's "task SYMBOL at ADDRESS" line, its machine code from
the object in the exported program (`objdump -d`). Printed: the task's instructions executed
(`Ir`), by mnemonic; those with a stack operand, split into spill stores, reloads (xmm / general
registers), operands folded from the stack and stack-slot-to-stack-slot copies (a value moved
between two spill slots: a phi of spilled values); how often each instruction ran (the code run
once per launch, per environment, per pair, ...); with `--top`, the hottest straight runs of
code with their counts. Counts are callgrind's (load-independent); the task function alone.
"""
from __future__ import annotations

import argparse
import collections
import pickle
import re
import subprocess
import tempfile

_SUBPOS = re.compile(r"^([+-]?)(0x[0-9a-fA-F]+|\d+)$")


def _pos(tok: str, cur: int) -> int:
    if tok == "*":
        return cur
    m = _SUBPOS.match(tok)
    sign, v = m.group(1), int(m.group(2), 0)
    return cur + v if sign == "+" else cur - v if sign == "-" else v


def self_costs(path: str) -> collections.Counter:
    """Self `Ir` per instruction address of a callgrind file written with `--dump-instr=yes`
    (positions `instr line`; the cost line after a `calls=` line is the call's inclusive cost
    and is skipped)."""
    cost = collections.Counter()
    addr = line = 0
    after_call = False
    for raw in open(path):
        s = raw.strip()
        if not s or s[0] == "#":
            continue
        head = s.split()[0]
        if "=" in head or ":" in head:
            after_call = head.startswith("calls=")
            continue
        parts = s.split()
        addr = _pos(parts[0], addr)
        if len(parts) > 1:
            line = _pos(parts[1], line)
        if after_call:
            after_call = False
            continue
        cost[addr] += int(parts[2]) if len(parts) > 2 else 0
    return cost


def task_address(log: str) -> tuple[str, int]:
    """(symbol, address) of the first task in a kernel_replay `run` log."""
    for ln in open(log):
        m = re.match(r"task (\S+) at (0x[0-9a-f]+)", ln)
        if m:
            return m.group(1), int(m.group(2), 16)
    raise SystemExit(f"no 'task SYMBOL at ADDRESS' line in {log}")


def disassembly(obj: bytes, symbol: str) -> list[tuple[int, str, str]]:
    """(offset, mnemonic, operands) of `symbol`'s instructions in the object `obj`."""
    with tempfile.NamedTemporaryFile(suffix=".o") as f:
        f.write(obj)
        f.flush()
        text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={symbol}",
                               f.name], capture_output=True, text=True, check=True).stdout
    out = []
    for ln in text.splitlines():
        m = re.match(r"\s+([0-9a-f]+):\s+(\S+)\s*(.*)", ln)
        if m:
            out.append((int(m.group(1), 16), m.group(2), m.group(3).strip()))
    return out


def stack_kind(op: str, args: str) -> str | None:
    """What an instruction with a stack operand does: 'spill store', 'reload xmm',
    'reload gpr' or 'folded' (an operand read from the stack by a computing instruction);
    None without one."""
    if "(%rsp)" not in args and "(%rbp)" not in args:
        return None
    src, _, dst = args.rpartition(",")
    if "(%rsp)" in dst or "(%rbp)" in dst:
        return "spill store"
    if op.startswith(("mov", "vmov")):
        return "reload xmm" if "mm" in dst else "reload gpr"
    return "folded"


def slot_copies(rows) -> int:
    """`Ir` of stack-slot-to-stack-slot copies: a reload into a register stored at once to
    another slot (counted for both instructions)."""
    n = 0
    for (_, op1, a1, c1), (_, op2, a2, c2) in zip(rows, rows[1:]):
        if stack_kind(op1, a1) in ("reload xmm", "reload gpr") and \
                stack_kind(op2, a2) == "spill store":
            reg = a1.rpartition(",")[2]
            src = a1.rpartition(",")[0]
            if a2.partition(",")[0] == reg and a2.rpartition(",")[2] != src:
                n += c1 + c2
    return n


def report(rows, top: int = 0) -> str:
    """The profile of `rows` = [(offset, mnemonic, operands, Ir)] as text."""
    total = sum(r[3] for r in rows) or 1
    pct = lambda v: f"{v:>10,} {100 * v / total:5.1f} %"  # noqa: E731
    out = [f"task instructions executed: {total:,} ({sum(1 for r in rows if r[3])} of "
           f"{len(rows)} instructions ran)"]
    by_op = collections.Counter()
    kinds = collections.Counter()
    for _, op, args, c in rows:
        by_op[op] += c
        k = stack_kind(op, args)
        if k:
            kinds[k] += c
    out.append("by mnemonic:")
    out += [f"  {op:14s}{pct(v)}" for op, v in by_op.most_common(20)]
    out.append(f"with a stack operand:{pct(sum(kinds.values()))}")
    out += [f"  {k:19s}{pct(v)}" for k, v in kinds.most_common()]
    out.append(f"  {'slot-to-slot copy':19s}{pct(slot_copies(rows))}  (within the above)")
    runs = collections.Counter()
    n_at = collections.Counter()
    for r in rows:
        if r[3]:
            runs[r[3]] += r[3]
            n_at[r[3]] += 1
    out.append("by how often an instruction ran (count: Ir, instructions):")
    out += [f"  {k:>8}x:{pct(v)} {n_at[k]:6d}" for k, v in runs.most_common(12)]
    if top:
        out.append(f"hottest runs of straight code (count, first offset, instructions, "
                   f"with a stack operand):")
        seqs, cur = [], None
        for off, op, args, c in rows:
            if cur and c == cur[0] and c:
                cur[2] += 1
                cur[3] += stack_kind(op, args) is not None
            else:
                cur = [c, off, 1, int(stack_kind(op, args) is not None)]
                seqs.append(cur)
        seqs.sort(key=lambda s: -s[0] * s[2])
        out += [f"  {c:>8}x at {off:#8x}: {n:5d} ({st} on the stack)" for c, off, n, st in
                seqs[:top] if c]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("callgrind", help="callgrind output (the dump of the toggled launch)")
    ap.add_argument("--blob", required=True, help="the program kernel_replay ran (--blob-out)")
    ap.add_argument("--log", required=True, help="kernel_replay's output under valgrind")
    ap.add_argument("--top", type=int, default=0)
    a = ap.parse_args()
    with open(a.blob, "rb") as f:
        obj = pickle.load(f)[0]  # the CPU backend's export: the object first
    symbol, base = task_address(a.log)
    costs = self_costs(a.callgrind)
    rows = [(off, op, args, costs.get(base + off, 0)) for off, op, args in
            disassembly(obj, symbol)]
    print(f"{symbol} at {base:#x}")
    print(report(rows, a.top))


if __name__ == "__main__":
    main()
