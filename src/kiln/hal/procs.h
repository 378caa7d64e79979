// The table of webgpu.h entry points resolved from one implementation.
//
// Dawn and wgpu-native export the same symbol names, so one process cannot
// link both; kiln loads the chosen library with dlopen and calls every
// WebGPU function through a Procs table. Everything above the HAL's loader
// uses only this table.
#pragma once

#include <webgpu.h>

namespace kiln::hal {

// X(name) for every entry point kiln needs; `name` is the symbol without the
// "wgpu" prefix, and WGPUProc##name is its type in webgpu.h.
#define KILN_WGPU_REQUIRED_PROCS(X)    \
  X(CreateInstance)                    \
  X(InstanceRequestAdapter)            \
  X(InstanceWaitAny)                   \
  X(InstanceProcessEvents)             \
  X(InstanceRelease)                   \
  X(AdapterGetInfo)                    \
  X(AdapterInfoFreeMembers)            \
  X(AdapterGetLimits)                  \
  X(AdapterGetFeatures)                \
  X(AdapterRequestDevice)              \
  X(AdapterRelease)                    \
  X(SupportedFeaturesFreeMembers)      \
  X(DeviceGetLimits)                   \
  X(DeviceGetFeatures)                 \
  X(DeviceHasFeature)                  \
  X(DeviceGetQueue)                    \
  X(DeviceCreateBuffer)                \
  X(DeviceCreateShaderModule)          \
  X(DeviceCreateBindGroupLayout)       \
  X(DeviceCreatePipelineLayout)        \
  X(DeviceCreateComputePipeline)       \
  X(DeviceCreateComputePipelineAsync)  \
  X(DeviceCreateBindGroup)             \
  X(DeviceCreateCommandEncoder)        \
  X(DeviceCreateQuerySet)              \
  X(DevicePushErrorScope)              \
  X(DevicePopErrorScope)               \
  X(DeviceDestroy)                     \
  X(DeviceRelease)                     \
  X(ShaderModuleGetCompilationInfo)    \
  X(ShaderModuleRelease)               \
  X(BindGroupLayoutRelease)            \
  X(PipelineLayoutRelease)             \
  X(ComputePipelineRelease)            \
  X(BindGroupRelease)                  \
  X(CommandEncoderBeginComputePass)    \
  X(CommandEncoderCopyBufferToBuffer)  \
  X(CommandEncoderClearBuffer)         \
  X(CommandEncoderFinish)              \
  X(CommandEncoderPushDebugGroup)      \
  X(CommandEncoderPopDebugGroup)       \
  X(CommandEncoderInsertDebugMarker)   \
  X(CommandEncoderResolveQuerySet)     \
  X(CommandEncoderRelease)             \
  X(ComputePassEncoderSetPipeline)     \
  X(ComputePassEncoderSetBindGroup)    \
  X(ComputePassEncoderDispatchWorkgroups) \
  X(ComputePassEncoderDispatchWorkgroupsIndirect) \
  X(ComputePassEncoderPushDebugGroup)  \
  X(ComputePassEncoderPopDebugGroup)   \
  X(ComputePassEncoderInsertDebugMarker) \
  X(ComputePassEncoderEnd)             \
  X(ComputePassEncoderRelease)         \
  X(CommandBufferRelease)              \
  X(QueueSubmit)                       \
  X(QueueWriteBuffer)                  \
  X(QueueOnSubmittedWorkDone)          \
  X(QueueRelease)                      \
  X(BufferMapAsync)                    \
  X(BufferGetMappedRange)              \
  X(BufferGetConstMappedRange)         \
  X(BufferUnmap)                       \
  X(BufferDestroy)                     \
  X(BufferRelease)                     \
  X(QuerySetDestroy)                   \
  X(QuerySetRelease)

struct Procs {
#define KILN_DECLARE_PROC(name) WGPUProc##name name = nullptr;
  KILN_WGPU_REQUIRED_PROCS(KILN_DECLARE_PROC)
#undef KILN_DECLARE_PROC
  // wgpu-native's extension: blocks until submitted work completes. Null on
  // implementations that lack it.
  using DevicePollFn = WGPUBool (*)(WGPUDevice, WGPUBool, const void*);
  DevicePollFn DevicePoll = nullptr;
  // wgpu-native's extension: a shader module compiled with the given runtime
  // checks (0: none). Null on implementations that lack it.
  using DeviceCreateShaderModuleTrustedFn =
      WGPUShaderModule (*)(WGPUDevice, const WGPUShaderModuleDescriptor*, uint64_t);
  DeviceCreateShaderModuleTrustedFn DeviceCreateShaderModuleTrusted = nullptr;
  // Dawn's extension: does the device's deferred work, such as freeing
  // destroyed buffers no work uses. Null on implementations that lack it.
  using DeviceTickFn = void (*)(WGPUDevice);
  DeviceTickFn DeviceTick = nullptr;
};

}  // namespace kiln::hal
