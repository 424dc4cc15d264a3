// Deliberately wrong: finds cuMemHostRegister and cuMemHostGetDevicePointer in the loaded libcuda by walking its ELF
// symbol table (no dlsym, no reference in the symbol table), lets kernels copy M and N into registered host memory,
// multiplies on the CPU and has a kernel copy P back. No copy is ever recorded.
#include <cuda.h>
#include <elf.h>
#include <link.h>

#include <cstring>

#include "tilelab/part.h"

namespace {

struct Lookup {
  const char* name;
  void* address;
};

// The loaded libcuda's dynamic symbols: .dynsym sits right before .dynstr.
int find_in_libcuda(struct dl_phdr_info* info, size_t, void* data) {
  auto* want = static_cast<Lookup*>(data);
  if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, "libcuda.so") == nullptr) return 0;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
    for (auto* d = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
         d->d_tag != DT_NULL; ++d) {
      if (d->d_tag == DT_SYMTAB) symtab = reinterpret_cast<const ElfW(Sym)*>(d->d_un.d_ptr);
      if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(d->d_un.d_ptr);
    }
  }
  if (symtab == nullptr || strtab == nullptr || reinterpret_cast<const char*>(symtab) > strtab) return 0;
  for (const ElfW(Sym)* s = symtab; reinterpret_cast<const char*>(s + 1) <= strtab; ++s) {
    if (s->st_value != 0 && std::strcmp(strtab + s->st_name, want->name) == 0) {
      want->address = reinterpret_cast<void*>(info->dlpi_addr + s->st_value);
      return 1;
    }
  }
  return 0;
}

void* driver_function(const char* name) {
  Lookup l{name, nullptr};
  dl_iterate_phdr(find_in_libcuda, &l);
  return l.address;
}

__global__ void copyKernel(const float* from, float* to, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) to[i] = from[i];
}

}  // namespace

void launchNaive(const float* M, const float* N, float* P, int Width) {
  using Register = CUresult (*)(void*, size_t, unsigned int);
  using DevicePointer = CUresult (*)(CUdeviceptr*, void*, unsigned int);
  auto reg = reinterpret_cast<Register>(driver_function("cuMemHostRegister_v2"));
  auto device_pointer = reinterpret_cast<DevicePointer>(driver_function("cuMemHostGetDevicePointer_v2"));
  if (reg == nullptr || device_pointer == nullptr) return;
  const int count = Width * Width;
  // One registered buffer, replaced (and leaked) when a larger one is needed.
  static float* host = nullptr;
  static size_t capacity = 0;
  static float* mapped = nullptr;
  if (3 * (size_t)count > capacity) {
    capacity = 3 * (size_t)count;
    host = new float[capacity];
    if (reg(host, capacity * sizeof(float), CU_MEMHOSTREGISTER_DEVICEMAP) != CUDA_SUCCESS) return;
    CUdeviceptr d = 0;
    device_pointer(&d, host, 0);
    mapped = reinterpret_cast<float*>(d);
  }
  const int blocks = (count + 255) / 256;
  copyKernel<<<blocks, 256>>>(M, mapped, count);
  copyKernel<<<blocks, 256>>>(N, mapped + count, count);
  cudaDeviceSynchronize();
  float* hM = host;
  float* hN = hM + count;
  float* hP = hN + count;
  std::memset(hP, 0, (size_t)count * sizeof(float));
  for (int r = 0; r < Width; ++r)
    for (int t = 0; t < Width; ++t)
      for (int c = 0; c < Width; ++c) hP[r * Width + c] += hM[r * Width + t] * hN[t * Width + c];
  copyKernel<<<blocks, 256>>>(mapped + 2 * count, P, count);
  cudaDeviceSynchronize();
}
