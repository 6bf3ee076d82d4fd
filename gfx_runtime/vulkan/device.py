"""Physical-device selection, capabilities (`DeviceCaps`) and the logical device.

Why a module of its own: everything the code generator and the launcher must know about a device
(f64 / i64 support, float atomics, binding and dispatch limits, lavapipe's quirks) is decided here
once, frozen into `DeviceCaps`, and the rest of the runtime reads limits only from that object.

Selection: `device=` (or env SPIRAD_VULKAN_DEVICE) is an index into the enumeration order or a
case-insensitive substring of the device name. Without it, the first device with a compute queue
and Vulkan >= 1.1 wins, preferring discrete GPU > integrated GPU > virtual GPU > CPU (lavapipe)
so a machine with a real GPU never silently runs on the software rasterizer.

Features enabled when present: shaderFloat64, shaderInt64; through VK_EXT_shader_atomic_float,
shaderBufferFloat32Atomics/AtomicAdd and shaderBufferFloat64Atomics/AtomicAdd; and
shaderBufferInt64Atomics (core in Vulkan 1.2, else VK_KHR_shader_atomic_int64), which 64-bit
integer atomics and the compare-and-swap loops of 64-bit float atomics need. A feature is only
usable once enabled at device creation: the validation layer flags a shader that uses
Int64Atomics on a device that did not enable it, even where the driver would run it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import GfxUnavailable
from ..protocol import GfxCaps

from . import constants as C
from .instance import Instance, ffi, lib, vk
from .vkresult import check, result_name


@dataclass(frozen=True, kw_only=True)
class DeviceCaps(GfxCaps):
    """What the selected Vulkan device can do; all limits the runtime enforces come from here.
    `GfxCaps`' fields (has_int64_atomics: shaderBufferInt64Atomics; preserves_float_specials:
    VkPhysicalDeviceFloatControlsProperties, Vulkan 1.2; the 8- / 16-bit types: shaderInt8,
    shaderInt16, shaderFloat16, storageBuffer8BitAccess / 16BitAccess, each enabled at device
    creation where the device has it; max_buffer_size: 2**64-1 where the device does not report
    one, before maintenance4), then the Vulkan runtime's own."""
    api_version: tuple[int, int, int]
    driver_name: str
    device_type: str  # "discrete", "integrated", "virtual", "cpu", "other"
    max_compute_work_group_size: tuple[int, int, int]
    max_compute_work_group_invocations: int
    max_bound_descriptor_sets: int
    max_memory_allocation_size: int
    is_lavapipe: bool
    timestamp_valid_bits: int = 0  # valid bits of a timestamp (`GfxCaps.timestamp_period_ns`)
    # Argument blocks bound at dynamic offsets (`arguments.py`): the offset alignment
    # (minStorageBufferOffsetAlignment) and how many dynamic storage buffers one set may hold
    # (maxDescriptorSetStorageBuffersDynamic; at least 4 on every device).
    min_storage_buffer_offset_alignment: int = 256
    max_dynamic_storage_buffers: int = 4


_TYPE_NAMES = {
    vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: "discrete",
    vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: "integrated",
    vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: "virtual",
    vk.VK_PHYSICAL_DEVICE_TYPE_CPU: "cpu",
}
_TYPE_RANK = {"discrete": 0, "integrated": 1, "virtual": 2, "cpu": 3, "other": 4}


@dataclass
class PhysicalDevice:
    """One enumerated physical device with what selection and device creation need."""
    index: int
    handle: object
    caps: DeviceCaps
    queue_family: int | None  # a family with VK_QUEUE_COMPUTE_BIT, None if there is none
    extensions: frozenset
    has_f32_atomics: bool
    has_f64_atomics: bool
    # How shaderBufferInt64Atomics is enabled: None (absent), "core" (1.2 feature) or the name of
    # the extension to enable (VK_KHR_shader_atomic_int64 on a 1.1 device).
    int64_atomics_via: str | None = None

    @property
    def suitable(self) -> bool:
        return self.queue_family is not None and self.caps.api_version >= (1, 1, 0)


def _enumerate_extensions(phys) -> frozenset:
    count = ffi.new("uint32_t*")
    check(lib.vkEnumerateDeviceExtensionProperties(phys, ffi.NULL, count, ffi.NULL),
          "vkEnumerateDeviceExtensionProperties")
    props = ffi.new("VkExtensionProperties[]", count[0])
    check(lib.vkEnumerateDeviceExtensionProperties(phys, ffi.NULL, count, props),
          "vkEnumerateDeviceExtensionProperties")
    return frozenset(ffi.string(props[i].extensionName).decode() for i in range(count[0]))


def _compute_queue_family(phys) -> int | None:
    count = ffi.new("uint32_t*")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(phys, count, ffi.NULL)
    props = ffi.new("VkQueueFamilyProperties[]", count[0])
    lib.vkGetPhysicalDeviceQueueFamilyProperties(phys, count, props)
    compute = [i for i in range(count[0])
               if props[i].queueFlags & vk.VK_QUEUE_COMPUTE_BIT and props[i].queueCount > 0]
    if not compute:
        return None
    # Prefer a family that also does graphics (the "universal" queue: lowest latency on most
    # drivers and the only one on lavapipe); any compute family works.
    universal = [i for i in compute if props[i].queueFlags & vk.VK_QUEUE_GRAPHICS_BIT]
    return (universal or compute)[0]


def _timestamps(phys, limits) -> dict:
    """The timestamp fields of DeviceCaps: usable when the compute queue family has valid bits."""
    family = _compute_queue_family(phys)
    if family is None:
        return {}
    count = ffi.new("uint32_t*")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(phys, count, ffi.NULL)
    props = ffi.new("VkQueueFamilyProperties[]", count[0])
    lib.vkGetPhysicalDeviceQueueFamilyProperties(phys, count, props)
    bits = int(props[family].timestampValidBits)
    period = float(limits.timestampPeriod)
    if bits == 0 or period <= 0:
        return {}
    return {"timestamp_period_ns": period, "timestamp_valid_bits": bits}


def _describe(index: int, phys, instance: Instance) -> PhysicalDevice:
    base = ffi.new("VkPhysicalDeviceProperties*")
    lib.vkGetPhysicalDeviceProperties(phys, base)
    dev_api = min(base.apiVersion, instance.api_version)
    extensions = _enumerate_extensions(phys)

    # Properties chain: driver (1.2), maintenance3 (1.1), maintenance4 (1.3).
    props2 = ffi.new("VkPhysicalDeviceProperties2*")
    props2.sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2
    driver = ffi.new("VkPhysicalDeviceDriverProperties*")
    driver.sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES
    maint3 = ffi.new("VkPhysicalDeviceMaintenance3Properties*")
    maint3.sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES
    maint4 = ffi.new("VkPhysicalDeviceMaintenance4Properties*")
    maint4.sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES
    floats = ffi.new("VkPhysicalDeviceFloatControlsProperties*")
    floats.sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES
    chain = [maint3]
    if dev_api >= C.VK_API_VERSION_1_2:
        chain += [driver, floats]
    if dev_api >= C.VK_API_VERSION_1_3:
        chain.append(maint4)
    _link(props2, chain)
    if dev_api >= C.VK_API_VERSION_1_1:
        lib.vkGetPhysicalDeviceProperties2(phys, props2)
    props = props2.properties if dev_api >= C.VK_API_VERSION_1_1 else base[0]
    limits = props.limits

    # Features chain.
    feats2 = ffi.new("VkPhysicalDeviceFeatures2*")
    feats2.sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2
    atomic = ffi.new("VkPhysicalDeviceShaderAtomicFloatFeaturesEXT*")
    atomic.sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT
    has_atomic_ext = C.EXT_SHADER_ATOMIC_FLOAT in extensions
    # Int64 atomics: core in 1.2; on a 1.1 device only through VK_KHR_shader_atomic_int64 (same
    # struct, same sType). Querying the struct on a device with neither is invalid usage.
    int64_core = dev_api >= C.VK_API_VERSION_1_2
    int64_ext = not int64_core and C.KHR_SHADER_ATOMIC_INT64 in extensions
    int64 = ffi.new("VkPhysicalDeviceShaderAtomicInt64Features*")
    int64.sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_INT64_FEATURES
    feature_chain = [atomic] if has_atomic_ext else []
    if int64_core or int64_ext:
        feature_chain.append(int64)
    small = _small_type_structs(dev_api)
    feature_chain += list(small.values())
    _link(feats2, feature_chain)
    if dev_api >= C.VK_API_VERSION_1_1:
        lib.vkGetPhysicalDeviceFeatures2(phys, feats2)
    else:
        lib.vkGetPhysicalDeviceFeatures(phys, ffi.addressof(feats2, "features"))
    features = feats2.features

    name = ffi.string(props.deviceName).decode("utf-8", "replace")
    driver_name = ffi.string(driver.driverName).decode("utf-8", "replace") \
        if dev_api >= C.VK_API_VERSION_1_2 else ""
    is_lavapipe = (dev_api >= C.VK_API_VERSION_1_2
                   and driver.driverID == C.VK_DRIVER_ID_MESA_LLVMPIPE) or "llvmpipe" in name
    f32_atomics = has_atomic_ext and bool(atomic.shaderBufferFloat32Atomics)
    f64_atomics = has_atomic_ext and bool(atomic.shaderBufferFloat64Atomics)
    has_int64_atomics = (int64_core or int64_ext) and dev_api >= C.VK_API_VERSION_1_1 \
        and bool(int64.shaderBufferInt64Atomics)
    int64_via = None if not has_int64_atomics else ("core" if int64_core
                                                    else C.KHR_SHADER_ATOMIC_INT64)
    caps = DeviceCaps(
        name=name,
        api_version=C.split_api_version(dev_api),
        driver_name=driver_name,
        device_type=_TYPE_NAMES.get(props.deviceType, "other"),
        has_f64=bool(features.shaderFloat64),
        has_i64=bool(features.shaderInt64),
        has_atomic_float32_add=has_atomic_ext and bool(atomic.shaderBufferFloat32AtomicAdd),
        has_atomic_float64_add=has_atomic_ext and bool(atomic.shaderBufferFloat64AtomicAdd),
        has_int64_atomics=has_int64_atomics,
        max_storage_buffer_range=int(limits.maxStorageBufferRange),
        max_per_stage_storage_buffers=int(limits.maxPerStageDescriptorStorageBuffers),
        max_compute_work_group_count=tuple(int(limits.maxComputeWorkGroupCount[i])
                                           for i in range(3)),
        max_compute_work_group_size=tuple(int(limits.maxComputeWorkGroupSize[i]) for i in range(3)),
        max_compute_work_group_invocations=int(limits.maxComputeWorkGroupInvocations),
        max_push_constants_size=int(limits.maxPushConstantsSize),
        max_bound_descriptor_sets=int(limits.maxBoundDescriptorSets),
        min_storage_buffer_offset_alignment=int(limits.minStorageBufferOffsetAlignment),
        max_dynamic_storage_buffers=int(limits.maxDescriptorSetStorageBuffersDynamic),
        max_memory_allocation_size=int(maint3.maxMemoryAllocationSize) or C.UINT64_MAX,
        max_buffer_size=(int(maint4.maxBufferSize) if dev_api >= C.VK_API_VERSION_1_3
                         else C.UINT64_MAX),
        is_lavapipe=is_lavapipe,
        loop_iteration_cap=C.LAVAPIPE_LOOP_ITERATION_CAP if is_lavapipe else None,
        **_small_type_caps(features, small),
        preserves_float_specials=tuple(
            bits for bits in (16, 32, 64) if dev_api >= C.VK_API_VERSION_1_2 and
            getattr(floats, f"shaderSignedZeroInfNanPreserveFloat{bits}")),
        **_timestamps(phys, limits),
    )
    return PhysicalDevice(index=index, handle=phys, caps=caps,
                          queue_family=_compute_queue_family(phys), extensions=extensions,
                          has_f32_atomics=f32_atomics, has_f64_atomics=f64_atomics,
                          int64_atomics_via=int64_via)


def _small_type_structs(dev_api) -> dict:
    """The feature structs of the 8- / 16-bit types this device version has (core: 16-bit
    storage in 1.1, the rest in 1.2), to query and then to enable."""
    out = {}
    if dev_api >= C.VK_API_VERSION_1_1:
        out["storage16"] = ffi.new("VkPhysicalDevice16BitStorageFeatures*")
        out["storage16"].sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES
    if dev_api >= C.VK_API_VERSION_1_2:
        out["storage8"] = ffi.new("VkPhysicalDevice8BitStorageFeatures*")
        out["storage8"].sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES
        out["f16i8"] = ffi.new("VkPhysicalDeviceShaderFloat16Int8Features*")
        out["f16i8"].sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES
    return out


def _small_type_caps(features, small: dict) -> dict:
    """DeviceCaps' has_int8 ... has_storage16 from the queried features."""
    s8, s16, f16i8 = small.get("storage8"), small.get("storage16"), small.get("f16i8")
    return dict(has_int16=bool(features.shaderInt16),
                has_int8=bool(f16i8 is not None and f16i8.shaderInt8),
                has_f16=bool(f16i8 is not None and f16i8.shaderFloat16),
                has_storage8=bool(s8 is not None and s8.storageBuffer8BitAccess),
                has_storage16=bool(s16 is not None and s16.storageBuffer16BitAccess))


def _small_type_features(caps) -> list:
    """The feature structs enabling what `caps` says the device has of the 8- / 16-bit types
    (only those it has: a 1.1 device gets no 1.2 struct)."""
    s = _small_type_structs(C.VK_API_VERSION_1_2)
    s["storage16"].storageBuffer16BitAccess = int(caps.has_storage16)
    s["storage8"].storageBuffer8BitAccess = int(caps.has_storage8)
    s["f16i8"].shaderInt8, s["f16i8"].shaderFloat16 = int(caps.has_int8), int(caps.has_f16)
    wanted = {"storage16": caps.has_storage16, "storage8": caps.has_storage8,
              "f16i8": caps.has_int8 or caps.has_f16}
    return [s[k] for k, on in wanted.items() if on]


def _link(head, chain: list) -> None:
    """Link cffi structs into a pNext chain behind `head` (callers keep them alive)."""
    prev = head
    for s in chain:
        prev.pNext = s
        prev = s


def enumerate_physical_devices(instance: Instance) -> list[PhysicalDevice]:
    count = ffi.new("uint32_t*")
    result = lib.vkEnumeratePhysicalDevices(instance.handle, count, ffi.NULL)
    if result < 0:
        raise GfxUnavailable(f"vkEnumeratePhysicalDevices failed ({result_name(result)})")
    handles = ffi.new("VkPhysicalDevice[]", count[0])
    result = lib.vkEnumeratePhysicalDevices(instance.handle, count, handles)
    if result < 0:
        raise GfxUnavailable(f"vkEnumeratePhysicalDevices failed ({result_name(result)})")
    return [_describe(i, handles[i], instance) for i in range(count[0])]


def select_physical_device(instance: Instance, selector: str | None = None) -> PhysicalDevice:
    """Pick the device named by `selector` (index or name substring; spirad passes
    SPIRAD_VULKAN_DEVICE), else the best suitable one."""
    devices = enumerate_physical_devices(instance)
    if not devices:
        raise GfxUnavailable("no Vulkan device found; install mesa-vulkan-drivers for lavapipe "
                              "(the CPU Vulkan driver) or a GPU driver")
    listing = ", ".join(f"{d.index}: {d.caps.name}" for d in devices)
    if selector is not None:
        sel = str(selector).strip()
        if sel.isdigit():
            matches = [d for d in devices if d.index == int(sel)]
        else:
            matches = [d for d in devices if sel.lower() in d.caps.name.lower()]
        if not matches:
            raise GfxUnavailable(f"no Vulkan device matches {sel!r} (SPIRAD_VULKAN_DEVICE / "
                                  f"device=); available: {listing}")
        dev = matches[0]
        if not dev.suitable:
            raise GfxUnavailable(f"Vulkan device {dev.caps.name!r} has no compute queue or is "
                                  "older than Vulkan 1.1")
        return dev
    suitable = [d for d in devices if d.suitable]
    if not suitable:
        raise GfxUnavailable(f"no Vulkan device with a compute queue and Vulkan >= 1.1; "
                              f"found: {listing}")
    return min(suitable, key=lambda d: (_TYPE_RANK[d.caps.device_type], d.index))


@dataclass
class LogicalDevice:
    handle: object
    queue: object
    queue_family: int
    physical: PhysicalDevice


def create_logical_device(phys: PhysicalDevice) -> LogicalDevice:
    """Create the VkDevice with one compute queue and every optional feature spirad can use."""
    keep: list = []
    priority = ffi.new("float*", 1.0)
    queue_info = ffi.new("VkDeviceQueueCreateInfo*")
    queue_info.sType = vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO
    queue_info.queueFamilyIndex = phys.queue_family
    queue_info.queueCount = 1
    queue_info.pQueuePriorities = priority

    feats2 = ffi.new("VkPhysicalDeviceFeatures2*")
    feats2.sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2
    feats2.features.shaderFloat64 = int(phys.caps.has_f64)
    feats2.features.shaderInt64 = int(phys.caps.has_i64)
    feats2.features.shaderInt16 = int(phys.caps.has_int16)
    extensions: list[str] = []
    chain: list = []
    if phys.has_f32_atomics or phys.has_f64_atomics:
        atomic = ffi.new("VkPhysicalDeviceShaderAtomicFloatFeaturesEXT*")
        atomic.sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT
        atomic.shaderBufferFloat32Atomics = int(phys.has_f32_atomics)
        atomic.shaderBufferFloat32AtomicAdd = int(phys.caps.has_atomic_float32_add)
        atomic.shaderBufferFloat64Atomics = int(phys.has_f64_atomics)
        atomic.shaderBufferFloat64AtomicAdd = int(phys.caps.has_atomic_float64_add)
        chain.append(atomic)
        extensions.append(C.EXT_SHADER_ATOMIC_FLOAT)
    if phys.caps.has_int64_atomics:
        int64 = ffi.new("VkPhysicalDeviceShaderAtomicInt64Features*")
        int64.sType = C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_INT64_FEATURES
        int64.shaderBufferInt64Atomics = 1
        chain.append(int64)
        if phys.int64_atomics_via not in (None, "core"):  # a 1.1 device: the KHR extension
            extensions.append(phys.int64_atomics_via)
    chain += _small_type_features(phys.caps)
    _link(feats2, chain)
    keep.extend(chain)
    if C.KHR_PORTABILITY_SUBSET in phys.extensions:  # required when present (MoltenVK)
        extensions.append(C.KHR_PORTABILITY_SUBSET)
    names = [ffi.new("char[]", e.encode()) for e in extensions]
    name_array = ffi.new("char*[]", names) if names else ffi.NULL

    info = ffi.new("VkDeviceCreateInfo*")
    info.sType = vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO
    info.pNext = feats2
    info.queueCreateInfoCount = 1
    info.pQueueCreateInfos = queue_info
    info.enabledExtensionCount = len(extensions)
    info.ppEnabledExtensionNames = name_array

    handle = ffi.new("VkDevice*")
    result = lib.vkCreateDevice(phys.handle, info, ffi.NULL, handle)
    if result != C.VK_SUCCESS:
        raise GfxUnavailable(f"could not create a Vulkan device on {phys.caps.name!r}: "
                              f"vkCreateDevice returned {result_name(result)}")
    queue = ffi.new("VkQueue*")
    lib.vkGetDeviceQueue(handle[0], phys.queue_family, 0, queue)
    return LogicalDevice(handle=handle[0], queue=queue[0], queue_family=phys.queue_family,
                         physical=phys)
