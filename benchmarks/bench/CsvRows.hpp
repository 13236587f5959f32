#pragma once
// a2sgd-bench's CSV file (--csv): one row per measured, projected or reference figure, with the
// ceilings of the current size (docs/methods.md lists the columns). Written by rank 0.

#include "Ceilings.hpp"

#include <cstdio>
#include <fstream>
#include <string>

namespace a2sgd::bench {

class CsvRows {
 public:
  /// Opens `path` and writes the header; false when it cannot be written.
  bool open(const std::string& path) {
    m_csv.open(path);
    m_csv << "kind,method,values,ranks,link_gbps,alpha_us,compress_s,comm_s,apply_s,step_s,bytes_per_rank,"
             "messages,compress_bytes_touched,apply_bytes_touched,compress_of_ceiling,apply_of_ceiling,read_gbs,"
             "copy_gbs,triad_gbs,axpy_gbs,rmw_gbs,rounding_gvs,packing_gvs,unpacking_gfs\n";
    return static_cast<bool>(m_csv);
  }
  /// The ceilings the rows of the current size are held against.
  void set_ceilings(const Ceilings& ceilings) { m_ceil = ceilings; }
  const Ceilings& ceilings() const noexcept { return m_ceil; }

  void row(const char* kind, const std::string& method, Index n, int ranks, double gbps, double alpha_us,
           double compress, double comm_s, double apply, double step, double bytes, double messages,
           const KernelTraffic& touched = {}) {
    if (!m_csv.is_open()) return;
    char buf[640];
    std::snprintf(buf, sizeof buf,
                  "%s,%s,%lld,%d,%g,%g,%.9g,%.9g,%.9g,%.9g,%.0f,%.0f,%.0f,%.0f,%.4g,%.4g,%.4g,%.4g,%.4g,%.4g,%.4g,%.4g,"
                  "%.4g,%.4g\n",
                  kind, method.c_str(), static_cast<long long>(n), ranks, gbps, alpha_us, compress, comm_s, apply, step,
                  bytes, messages, touched.compress.bytes(), touched.apply.bytes(),
                  m_ceil.fraction(touched.compress, compress), m_ceil.fraction(touched.apply, apply), m_ceil.read,
                  m_ceil.copy, m_ceil.triad, m_ceil.axpy, m_ceil.rmw, m_ceil.rounding / 1e9, m_ceil.packing / 1e9,
                  m_ceil.unpacking / 1e9);
    m_csv << buf;
  }
  /// A reference kernel's seconds as a row of its own.
  void reference(const std::string& name, Index n, int ranks, double seconds) {
    row("reference", name, n, ranks, 0, 0, 0, 0, 0, seconds, 0, 0);
  }

  /// Closes the file; false when writing failed (disk full). True when none was open.
  bool close() {
    if (!m_csv.is_open()) return true;
    m_csv.close();
    return static_cast<bool>(m_csv);
  }

 private:
  std::ofstream m_csv;
  Ceilings m_ceil;
};

}  // namespace a2sgd::bench
