#pragma once
// Minimal RAII and error handling over the HDF5 C API (internal to a2sgd::io).

#include <a2sgd/core/Error.hpp>

#include <hdf5.h>

#include <string>
#include <utility>

namespace a2sgd::io::impl {

/// Owns an HDF5 identifier and closes it once.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  /// Throws Error(what) when `id` is invalid (the call that produced it failed).
  Handle(hid_t id, Closer close, const std::string& what) : m_id(id), m_close(close) {
    if (id < 0) throw Error(what);
  }
  ~Handle() { reset(); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : m_id(std::exchange(o.m_id, -1)), m_close(o.m_close) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      m_id = std::exchange(o.m_id, -1);
      m_close = o.m_close;
    }
    return *this;
  }
  hid_t get() const noexcept { return m_id; }
  /// Gives up ownership without closing (for a parallel file whose collective close cannot
  /// complete: see io::can_finalize()).
  hid_t release() noexcept { return std::exchange(m_id, -1); }
  /// Closes now and reports failure (a failed close of a file means data may be lost).
  void close(const std::string& what) {
    if (m_id < 0) return;
    const herr_t rc = m_close(std::exchange(m_id, -1));
    if (rc < 0) throw Error(what);
  }

 private:
  void reset() noexcept {
    if (m_id >= 0) m_close(std::exchange(m_id, -1));
  }
  hid_t m_id = -1;
  Closer m_close = nullptr;
};

inline void check(herr_t rc, const std::string& what) {
  if (rc < 0) throw Error(what);
}

/// HDF5 prints its error stack to stderr by default; a2sgd reports errors itself.
inline void silence_hdf5_errors() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

}  // namespace a2sgd::io::impl
