"""Graphics-API runtimes of spirad: they run SPIR-V, they never see the IR.

A runtime receives SPIR-V bytes plus plain metadata (binding counts, push-constant sizes, buffer
sizes) from the driver and owns everything device-side: device selection, buffers, pipelines,
command recording and submission. Subpackages are imported by name on first use (`vulkan` here;
Metal through `wgpu` later), so importing `gfx_runtime` costs nothing and loads no driver.
"""
