"""Binding arrays of storage buffers on an adapter that offers them (Mesa 25's lavapipe,
unpacked beside the system's by scripts/install_lavapipe25.sh; each check runs in a subprocess
with tests/support/lavapipe25.py's environment). docs/metal.md, "Binding arrays", says why
spirad does not bind directly bound ndarrays through one: these tests hold the evidence, and the
second one fails the day wgpu takes such an array from SPIR-V, the route of spirad's modules.

* the adapter offers `buffer-binding-array` and `storage-resource-binding-array`, and a binding
  array of 40 storage buffers (past the 31 of an M1's buffer table) runs from WGSL;
* the same array declared in SPIR-V passes spirv-val, but naga's SPIR-V front end (wgpu-native
  29, wgpu-py 0.32) rejects it, and wgpu-py gives a device no binding-array elements;
* spirad's emulated M1 on this adapter still runs 27 directly bound ndarrays (28 storage
  buffers) and refuses 28 with its clear error, as on the system lavapipe.
"""
import json
import subprocess
import sys

import pytest

from tests.metal import binding_array_probe as probe
from tests.support.lavapipe25 import env_or_skip


@pytest.fixture(scope="module")
def measured():
    """The probe's JSON line, run once under Mesa 25's lavapipe."""
    r = subprocess.run([sys.executable, "-m", "tests.metal.binding_array_probe"],
                       env=env_or_skip(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_adapter_offers_binding_arrays_and_runs_forty_buffers_in_one_from_wgsl(measured):
    assert "Mesa 25." in measured["adapter"], measured["adapter"]
    assert {"buffer-binding-array", "storage-resource-binding-array"} <= set(measured["features"])
    assert measured["wgsl_device_limit"] == 1000
    out, first = measured["wgsl"]
    want = [7.0 + (probe.N - 1) + probe.ARG] * probe.ELEMS  # buffers 7 and 39 of the array
    assert out == want and first == want


def test_nagas_spirv_front_end_rejects_a_valid_binding_array_of_storage_buffers(measured):
    """The blocker. When this fails, wgpu accepts the array from SPIR-V: spirad can bind its
    direct ndarrays through one (docs/metal.md, "Binding arrays", the plan)."""
    assert measured["spirv_val"] == "valid"
    assert "for the array is invalid" in measured["spirv"], (
        f"naga's SPIR-V front end now says {measured['spirv']!r} to a binding array of storage "
        f"buffers: revisit docs/metal.md, 'Binding arrays'")
    assert measured["device_limit"] == 0  # wgpu-py passes no max-binding-array-elements


def test_the_emulated_m1_on_this_adapter_still_refuses_the_29th_storage_buffer():
    """The plain M1 profile asks for no binding-array feature: on an adapter that offers them
    the 28-buffer limit and its error are the same (the test of test_metal_limits.py, run under
    Mesa 25's lavapipe)."""
    e = env_or_skip()
    e["SPIRAD_METAL_EMULATE"] = "1"
    test = ("tests/metal/test_metal_limits.py::"
            "test_the_largest_kernel_over_direct_ndarrays_runs_and_one_more_is_refused")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
                       env=e, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
