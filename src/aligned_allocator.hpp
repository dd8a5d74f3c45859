// An allocator for buffers the Hadamard kernels stream through: 64-byte (cache line) aligned, so
// their non-temporal stores apply (std::allocator gives 16).
#pragma once

#include <cstddef>
#include <new>

namespace optireduce {

template <typename T, std::size_t Alignment = 64>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U, Alignment>&) {}
  template <typename U>
  struct rebind {
    using other = AlignedAllocator<U, Alignment>;
  };
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{Alignment})); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{Alignment}); }
  friend bool operator==(const AlignedAllocator&, const AlignedAllocator&) { return true; }
};

}  // namespace optireduce
