"""The first line every benchmark prints: what the CPU backend compiles for in this run — the
CPU, its ISA and vector width, the SPMD lanes (`spirad.backends.cpu.target_summary`, as
`python -m spirad` shows it). CPU timings depend on it (32 lanes with AVX-512, 16 with AVX2,
8 with NEON; SPIRAD_CPU_TARGET / SPIRAD_CPU_SPMD_LANES force others), so a result is never
quoted without it.

    from target_info import print_target
    print_target()        # after the benchmark has set its own SPIRAD_* switches
"""
from __future__ import annotations

import sys


def target_line() -> str:
    from spirad.backends.cpu import target_summary
    try:
        return f"cpu target: {target_summary()}"
    except Exception as e:  # e.g. a SPIRAD_CPU_TARGET this CPU cannot run: the run says so
        return f"cpu target: invalid: {e}"


def print_target(file=None) -> None:
    print(target_line(), file=file or sys.stdout, flush=True)
