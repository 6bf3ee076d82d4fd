"""Native DLPack deleter and capsule destructor, JIT-compiled once per process with llvmlite.

Why: a consumer may drop a capsule (calling its destructor) or call a tensor's deleter while a
Python exception is set (numpy does, right after refusing a GPU capsule); a ctypes callback
cannot run then (the call itself fails and the consumer's exception is lost). These functions
touch no Python state: the deleter stores 1 into the export's flag word (`manager_ctx`), the
destructor calls the deleter of a capsule that nobody consumed. `dlpack.sweep` frees the
flagged exports later. `install()` hands them to `dlpack.use_native`.
"""
from __future__ import annotations

import ctypes
import threading

from . import dlpack

_lock = threading.Lock()
_tracker = []


def _ir() -> str:
    ctx, ctx_v = dlpack.MANAGER_CTX_OFFSET, dlpack.MANAGER_CTX_OFFSET_V
    return f"""
@name = private constant [9 x i8] c"dltensor\\00"
@name_v = private constant [19 x i8] c"dltensor_versioned\\00"
declare i32 @PyCapsule_IsValid(ptr, ptr)
declare ptr @PyCapsule_GetPointer(ptr, ptr)

define void @spirad_dlpack_deleter(ptr %m) nounwind {{
  %p = getelementptr i8, ptr %m, i64 {ctx}
  %flag = load ptr, ptr %p
  store atomic i32 1, ptr %flag seq_cst, align 4
  ret void
}}

define void @spirad_dlpack_deleter_v(ptr %m) nounwind {{
  %p = getelementptr i8, ptr %m, i64 {ctx_v}
  %flag = load ptr, ptr %p
  store atomic i32 1, ptr %flag seq_cst, align 4
  ret void
}}

define void @spirad_dlpack_destructor(ptr %cap) nounwind {{
entry:
  %a = call i32 @PyCapsule_IsValid(ptr %cap, ptr @name)
  %is_a = icmp ne i32 %a, 0
  br i1 %is_a, label %legacy, label %check_v
legacy:
  %m = call ptr @PyCapsule_GetPointer(ptr %cap, ptr @name)
  call void @spirad_dlpack_deleter(ptr %m)
  ret void
check_v:
  %b = call i32 @PyCapsule_IsValid(ptr %cap, ptr @name_v)
  %is_b = icmp ne i32 %b, 0
  br i1 %is_b, label %versioned, label %done
versioned:
  %mv = call ptr @PyCapsule_GetPointer(ptr %cap, ptr @name_v)
  call void @spirad_dlpack_deleter_v(ptr %mv)
  ret void
done:
  ret void
}}
"""


def install() -> bool:
    """Compile (once) and install the native functions; False without llvmlite."""
    with _lock:
        if _tracker:
            return True
        try:
            from ..cpu_runtime import _Target
        except ImportError:
            return False
        t = _Target.get()
        syms = ("spirad_dlpack_destructor", "spirad_dlpack_deleter", "spirad_dlpack_deleter_v")
        b = t.builder(False).add_ir(_ir())
        for name in ("PyCapsule_IsValid", "PyCapsule_GetPointer"):
            b.import_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value)
        for s in syms:
            b.export_symbol(s)
        with t.compile_lock:
            tracker = b.link(t.lljit, "spirad_dlpack_native")
        _tracker.append(tracker)
        dlpack.use_native(*(tracker[s] for s in syms))
        return True
