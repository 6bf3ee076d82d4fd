"""Hand-written CPU task functions in LLVM IR, for the runtime's and the pool's tests and benchmark.

A task function has the code generator's signature, `void @name(ptr %bufs, ptr %args, begin,
end, i32 %worker)` (`llvm_codegen.cpu_runtime`), and runs iterations [begin, end). Writing
the loop skeleton once here keeps the tests about what their bodies do.
"""
from __future__ import annotations


def range_task_ir(name: str, prologue: str, body: str, index: str = "i64") -> str:
    """Task `name` looping `%i` (type `index`) over [begin, end): `prologue` runs once, in the
    entry block; `body` once per iteration, starting in block `body` and ending with
    `br label %latch`."""
    return f"""
define void @{name}(ptr %bufs, ptr %args, {index} %begin, {index} %end, i32 %worker) {{
entry:
{prologue}
  br label %head
head:
  %i = phi {index} [%begin, %entry], [%next, %latch]
  %c = icmp slt {index} %i, %end
  br i1 %c, label %body, label %done
body:
{body}
latch:
  %next = add {index} %i, 1
  br label %head
done:
  ret void
}}
"""


def chain_task_ir(name: str, ty: str, mul: str, add: str, accumulate: bool = False,
                  slots: bool = False) -> str:
    """out[i] (bufs[0], of `ty`) = a chain of `k` (args[0], i64) dependent `x * mul + add` from
    x = i: work per iteration that the optimiser cannot shorten. `accumulate`: out[i] += the
    chain's value; `slots`: bufs[1][i] (i32) = the worker slot that ran iteration i."""
    prologue = "  %out = load ptr, ptr %bufs\n  %k = load i64, ptr %args"
    if slots:
        prologue += "\n  %ps = getelementptr ptr, ptr %bufs, i64 1\n  %slots = load ptr, ptr %ps"
    body = f"""  %x0 = sitofp i64 %i to {ty}
  br label %inner
inner:
  %j = phi i64 [0, %body], [%j1, %inner]
  %x = phi {ty} [%x0, %body], [%x1, %inner]
  %m = fmul {ty} %x, {mul}
  %x1 = fadd {ty} %m, {add}
  %j1 = add i64 %j, 1
  %ci = icmp slt i64 %j1, %k
  br i1 %ci, label %inner, label %tail
tail:
  %p = getelementptr {ty}, ptr %out, i64 %i"""
    if accumulate:
        body += f"\n  %old = load {ty}, ptr %p\n  %sum = fadd {ty} %old, %x1\n  store {ty} %sum, ptr %p"
    else:
        body += f"\n  store {ty} %x1, ptr %p"
    if slots:
        body += "\n  %q = getelementptr i32, ptr %slots, i64 %i\n  store i32 %worker, ptr %q"
    return range_task_ir(name, prologue, body + "\n  br label %latch")
