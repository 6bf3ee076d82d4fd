"""Linux `perf` names for JIT-compiled task functions (`SPIRAD_PERF_MAP=1`, read by
`spirad.options`; `CpuRuntime(perf_map=...)`).

Why: a sampling profile of a program on the CPU backend (`perf record -e cpu-clock python ...`)
otherwise shows every sample in spirad's kernels as an anonymous address, so nothing says which
task of a kernel the time goes to (a Genesis step is dozens of kernels of several tasks each,
issue #39). perf reads `/tmp/perf-<pid>.map`, one line per function, `START SIZE name` in hex
(tools/perf/Documentation/jit-interface.txt); each linked object appends its exported task
functions there, with the sizes from the object's own symbol table.

Only the names of the exported symbols are written (a task function is named after its kernel
and task: `cpu_program` names them), so the file holds nothing a user did not write; it grows by
one line per task function compiled or loaded in the process and is never cleaned up by spirad
(perf's convention: the profiling user deletes it). `SPIRAD_PERF_MAP=objects` also keeps each
linked object file in `/tmp/perf-<pid>-objects/` (named after its first exported symbol), so a
sample's offset into a task function can be read against `objdump -d` of its code.
"""
from __future__ import annotations

import os
import struct


def elf_symbol_sizes(obj: bytes) -> dict[str, int]:
    """Name -> size of the function symbols of a 64-bit little-endian ELF object ({} for
    any other format: Mach-O and COFF objects have no sizes to read)."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        return {}
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + k * shentsize) for k in range(shnum)]
    sizes = {}
    for sh in sections:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[sh[6]]  # sh_link: its string table
        for off in range(sh[4], sh[4] + sh[5], sh[9]):
            name, info, _other, _shndx, _value, size = struct.unpack_from("<IBBHQQ", obj, off)
            if info & 0xF == 2 and size:  # STT_FUNC
                start = strtab[4] + name
                sizes[obj[start:obj.index(b"\0", start)].decode()] = size
    return sizes


def append(obj: bytes, addresses: dict[str, int], objects: bool = False) -> None:
    """Add `addresses` (exported symbol -> address, as linked) of object `obj` to this
    process's perf map; `objects`: keep the object file too."""
    sizes = elf_symbol_sizes(obj)
    lines = "".join(f"{addr:x} {sizes.get(name, 1):x} {name}\n" for name, addr in addresses.items())
    with open(f"/tmp/perf-{os.getpid()}.map", "a") as f:
        f.write(lines)
    if objects and addresses:  # for `objdump -d`: sample offsets
        d = f"/tmp/perf-{os.getpid()}-objects"
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, min(addresses) + ".o"), "wb") as f:
            f.write(obj)
