#pragma once
// An allocator for large buffers that are written before they are read:
// memory comes zeroed from the kernel and is faulted in page by page on
// first touch, never up front. A std::vector's value-initialization (resize,
// the size constructor) writes nothing, so allocating tens of MB costs no
// page faults until the pages are used; a fresh buffer still reads as zeros.
// Buffers of at least MmapMin bytes (kZeroPageMmapMin unless given) are
// anonymous mappings of their own (glibc's malloc would hand a large chunk
// from its heap once its dynamic mmap threshold has grown, and calloc would
// then zero-fill it); smaller ones come from calloc. A vector grown within
// its capacity keeps whatever its elements held (stale values of a reused
// buffer), so this is only for buffers every element of which is written
// before it is read, or sized once (a switch's register arrays: zeros
// until written).
//
// Elements are plain bytes (trivially copyable and destructible):
// trivially default-constructible types, or classes whose every member
// defaults to zero and that say so with `static constexpr bool
// kZeroBytesAreDefault = true;` (each with a static_assert of its defaults
// beside it: RankBits, dp::SwitchProgram::Agg, Rina's Task).
#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

namespace ina {

inline constexpr size_t kZeroPageMmapMin = size_t{1} << 20;

// All-zero bytes are a default-constructed T.
template <class T>
concept ZeroBytesAreDefault = std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T> &&
                              (std::is_trivially_default_constructible_v<T> || requires { requires T::kZeroBytesAreDefault; });

template <class T, size_t MmapMin = kZeroPageMmapMin>
struct ZeroPageAllocator {
  static_assert(ZeroBytesAreDefault<T> && alignof(T) <= alignof(std::max_align_t),
                "zeroed pages stand for values only of types whose default is all zero bytes and that calloc's "
                "alignment serves");
  using value_type = T;
  template <class U>
  struct rebind {
    using other = ZeroPageAllocator<U, MmapMin>;
  };
  ZeroPageAllocator() = default;
  template <class U>
  ZeroPageAllocator(const ZeroPageAllocator<U, MmapMin>&) noexcept {}

  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    if (bytes >= MmapMin) {
      void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      return static_cast<T*>(p);
    }
    void* p = std::calloc(n == 0 ? 1 : n, sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) >= MmapMin) ::munmap(p, n * sizeof(T));
    else std::free(p);
  }
  // Value-initialization leaves the (zeroed or reused) memory as it is:
  // zero bytes are the default (ZeroBytesAreDefault), and writing them
  // would fault in every page.
  template <class U>
  void construct(U*) noexcept {}
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const ZeroPageAllocator<U, MmapMin>&) const noexcept { return true; }
};

}  // namespace ina
