// The few pieces of the NVML C ABI that perseus calls, declared here so that building needs
// neither CUDA nor nvml.h. They mirror the public nvml.h: nvmlReturn_t and nvmlClockType_t
// are C enums (int-sized), nvmlDevice_t is a pointer to an opaque struct, clocks are
// unsigned int MHz, power unsigned int mW, energy unsigned long long mJ.
#pragma once

namespace perseus::nvml {

using Return = int;                // nvmlReturn_t
struct DeviceOpaque;               // struct nvmlDevice_st
using Device = DeviceOpaque*;      // nvmlDevice_t
using ClockType = int;             // nvmlClockType_t

inline constexpr Return kSuccess = 0;                // NVML_SUCCESS
inline constexpr Return kErrorUninitialized = 1;     // NVML_ERROR_UNINITIALIZED
inline constexpr Return kErrorInvalidArgument = 2;   // NVML_ERROR_INVALID_ARGUMENT
inline constexpr Return kErrorNotSupported = 3;      // NVML_ERROR_NOT_SUPPORTED
inline constexpr Return kErrorNoPermission = 4;      // NVML_ERROR_NO_PERMISSION
inline constexpr Return kErrorNotFound = 6;          // NVML_ERROR_NOT_FOUND
inline constexpr Return kErrorInsufficientSize = 7;  // NVML_ERROR_INSUFFICIENT_SIZE
inline constexpr Return kErrorUnknown = 999;         // NVML_ERROR_UNKNOWN

inline constexpr ClockType kClockGraphics = 0;  // NVML_CLOCK_GRAPHICS
inline constexpr ClockType kClockSm = 1;        // NVML_CLOCK_SM
inline constexpr ClockType kClockMem = 2;       // NVML_CLOCK_MEM

inline constexpr unsigned int kDeviceNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE

// Function pointer types, one per symbol, named after it.
using InitV2Fn = Return (*)();                                   // nvmlInit_v2
using ShutdownFn = Return (*)();                                 // nvmlShutdown
using ErrorStringFn = const char* (*)(Return);                   // nvmlErrorString
using DeviceGetCountV2Fn = Return (*)(unsigned int*);            // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexV2Fn = Return (*)(unsigned int, Device*);
using DeviceGetNameFn = Return (*)(Device, char*, unsigned int);
using DeviceGetSupportedMemoryClocksFn = Return (*)(Device, unsigned int* count, unsigned int* clocks_mhz);
using DeviceGetSupportedGraphicsClocksFn = Return (*)(Device, unsigned int memory_clock_mhz, unsigned int* count,
                                                      unsigned int* clocks_mhz);
using DeviceGetMaxClockInfoFn = Return (*)(Device, ClockType, unsigned int* clock_mhz);
using DeviceSetGpuLockedClocksFn = Return (*)(Device, unsigned int min_mhz, unsigned int max_mhz);
using DeviceResetGpuLockedClocksFn = Return (*)(Device);
using DeviceSetMemoryLockedClocksFn = Return (*)(Device, unsigned int min_mhz, unsigned int max_mhz);
using DeviceResetMemoryLockedClocksFn = Return (*)(Device);
using DeviceGetPowerManagementDefaultLimitFn = Return (*)(Device, unsigned int* limit_mw);
using DeviceSetPowerManagementLimitFn = Return (*)(Device, unsigned int limit_mw);
using DeviceGetTotalEnergyConsumptionFn = Return (*)(Device, unsigned long long* energy_mj);
using DeviceGetPowerUsageFn = Return (*)(Device, unsigned int* power_mw);

}  // namespace perseus::nvml
