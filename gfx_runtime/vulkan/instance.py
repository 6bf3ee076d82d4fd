"""The process-wide `VkInstance`, the validation layer and its message list.

Why process-global: the `vulkan` binding routes every debug-utils callback through one module
global, and instance creation with layers costs tens of milliseconds, while `sd.init()` may
re-create the runtime many times in one process. So an instance is created once per validation
setting (at most two per process) and reused by every `VulkanRuntime`; devices come and go.

The messenger uses our own `ffi.callback` (not the binding's global hook), keeps messages of
severity warning and error, and appends them to one list; `take_validation_messages()` returns and
clears it. The messenger create-info is also chained into `VkInstanceCreateInfo` so messages about
instance creation itself are caught.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..errors import GfxUnavailable

from . import constants as C
from .vkresult import check, result_name

try:
    import vulkan as vk
except OSError as exc:  # the binding dlopens libvulkan at import time
    raise GfxUnavailable(
        "the Vulkan loader (libvulkan.so.1) was not found; install libvulkan1 and a driver "
        "(mesa-vulkan-drivers for lavapipe)") from exc

ffi = vk.ffi
lib = vk.lib

_SEVERITY_WARNING = vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
_SEVERITY_ERROR = vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT
_TYPES = (vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
          | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
          | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT)

_lock = threading.Lock()
_messages: list[str] = []
_instances: dict[bool, "Instance"] = {}


def _on_debug_message(severity, types, data, user_data):  # called by the layer, any thread
    try:
        level = "ERROR" if severity & _SEVERITY_ERROR else "WARNING"
        ident = ffi.string(data.pMessageIdName).decode("utf-8", "replace") \
            if data.pMessageIdName != ffi.NULL else ""
        text = ffi.string(data.pMessage).decode("utf-8", "replace") \
            if data.pMessage != ffi.NULL else ""
        with _lock:
            _messages.append(f"[{level}] {ident}: {text}" if ident else f"[{level}] {text}")
    except Exception as exc:  # never let an exception unwind through C
        with _lock:
            _messages.append(f"[ERROR] spirad: failed to format a validation message: {exc!r}")
    return 0  # VK_FALSE: do not abort the call


# One callback object for the whole process; every messenger points at it.
_CALLBACK = ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT", _on_debug_message)


def take_validation_messages() -> list[str]:
    """Return the validation messages gathered so far (all runtimes) and clear the list."""
    with _lock:
        out = list(_messages)
        _messages.clear()
    return out


@dataclass
class Instance:
    handle: object
    api_version: int
    validation: bool
    portability: bool
    messenger: object = None
    keepalive: list = field(default_factory=list)


def _layer_names() -> set[str]:
    count = ffi.new("uint32_t*")
    what = "vkEnumerateInstanceLayerProperties"
    check(lib.vkEnumerateInstanceLayerProperties(count, ffi.NULL), what)
    props = ffi.new("VkLayerProperties[]", count[0])
    check(lib.vkEnumerateInstanceLayerProperties(count, props), what)
    return {ffi.string(props[i].layerName).decode() for i in range(count[0])}


def _instance_extension_names() -> set[str]:
    count = ffi.new("uint32_t*")
    check(lib.vkEnumerateInstanceExtensionProperties(ffi.NULL, count, ffi.NULL),
          "vkEnumerateInstanceExtensionProperties")
    props = ffi.new("VkExtensionProperties[]", count[0])
    check(lib.vkEnumerateInstanceExtensionProperties(ffi.NULL, count, props),
          "vkEnumerateInstanceExtensionProperties")
    return {ffi.string(props[i].extensionName).decode() for i in range(count[0])}


def _cstr_array(names: list[str], keep: list):
    strings = [ffi.new("char[]", n.encode()) for n in names]
    keep.extend(strings)
    arr = ffi.new("char*[]", strings) if strings else ffi.NULL
    keep.append(arr)
    return arr


def _messenger_info(keep: list):
    info = ffi.new("VkDebugUtilsMessengerCreateInfoEXT*")
    info.sType = C.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT
    info.messageSeverity = _SEVERITY_WARNING | _SEVERITY_ERROR
    info.messageType = _TYPES
    info.pfnUserCallback = _CALLBACK
    keep.append(info)
    return info


def _create(validation: bool) -> Instance:
    loader_version = ffi.new("uint32_t*")
    if lib.vkEnumerateInstanceVersion(loader_version) != C.VK_SUCCESS:
        loader_version[0] = C.VK_API_VERSION_1_0
    if loader_version[0] < C.VK_API_VERSION_1_1:
        raise GfxUnavailable("the Vulkan loader supports only Vulkan 1.0; "
                              "spirad needs 1.1 or newer")
    api_version = min(loader_version[0], C.VK_API_VERSION_1_3)

    keep: list = []
    layers: list[str] = []
    extensions: list[str] = []
    available_ext = _instance_extension_names()
    if validation:
        if C.VALIDATION_LAYER not in _layer_names():
            raise GfxUnavailable(
                f"Vulkan validation was requested but {C.VALIDATION_LAYER} is not installed "
                "(apt: vulkan-validationlayers); unset SPIRAD_VALIDATION or install it")
        if C.EXT_DEBUG_UTILS not in available_ext:
            raise GfxUnavailable("Vulkan validation needs the instance extension "
                                  f"{C.EXT_DEBUG_UTILS}")
        layers.append(C.VALIDATION_LAYER)
        extensions.append(C.EXT_DEBUG_UTILS)
    portability = C.KHR_PORTABILITY_ENUMERATION in available_ext  # MoltenVK on macOS
    if portability:
        extensions.append(C.KHR_PORTABILITY_ENUMERATION)

    app = ffi.new("VkApplicationInfo*")
    app.sType = vk.VK_STRUCTURE_TYPE_APPLICATION_INFO
    app_name = ffi.new("char[]", b"spirad")
    keep += [app, app_name]
    app.pApplicationName = app_name
    app.pEngineName = app_name
    app.apiVersion = api_version

    info = ffi.new("VkInstanceCreateInfo*")
    info.sType = vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO
    info.pApplicationInfo = app
    info.enabledLayerCount = len(layers)
    info.ppEnabledLayerNames = _cstr_array(layers, keep)
    info.enabledExtensionCount = len(extensions)
    info.ppEnabledExtensionNames = _cstr_array(extensions, keep)
    if portability:
        info.flags = C.VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
    if validation:
        info.pNext = _messenger_info(keep)

    handle = ffi.new("VkInstance*")
    result = lib.vkCreateInstance(info, ffi.NULL, handle)
    if result != C.VK_SUCCESS:
        raise GfxUnavailable(
            f"vkCreateInstance failed ({result_name(result)}); no usable Vulkan driver "
            "(install mesa-vulkan-drivers for lavapipe)")
    inst = Instance(handle=handle[0], api_version=api_version, validation=validation,
                    portability=portability, keepalive=keep)
    if validation:
        create = ffi.cast("PFN_vkCreateDebugUtilsMessengerEXT",
                          lib.vkGetInstanceProcAddr(inst.handle, b"vkCreateDebugUtilsMessengerEXT"))
        messenger = ffi.new("VkDebugUtilsMessengerEXT*")
        check(create(inst.handle, _messenger_info(keep), ffi.NULL, messenger),
              "vkCreateDebugUtilsMessengerEXT")
        inst.messenger = messenger[0]
    return inst


def get_instance(validation: bool) -> Instance:
    """The process-wide instance for this validation setting, created on first use."""
    with _lock:
        inst = _instances.get(validation)
    if inst is None:
        inst = _create(validation)
        with _lock:
            inst = _instances.setdefault(validation, inst)
    return inst
