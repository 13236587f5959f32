#pragma once
// JSON Lines records: one flat object per line, written by rank 0.

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace a2sgd::train {

/// Builds one flat JSON object.
class JsonRecord {
 public:
  JsonRecord& add(const std::string& key, const std::string& value) {
    field(key);
    m_out << '"';
    for (char c : value) {
      if (c == '"' || c == '\\')
        m_out << '\\' << c;
      else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        m_out << buf;
      } else
        m_out << c;
    }
    m_out << '"';
    return *this;
  }
  JsonRecord& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonRecord& add(const std::string& key, double value) {
    field(key);
    if (std::isfinite(value)) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", value);
      m_out << buf;
    } else {
      m_out << "null";  // JSON has no NaN/Inf
    }
    return *this;
  }
  JsonRecord& add(const std::string& key, std::uint64_t value) {
    field(key);
    m_out << value;
    return *this;
  }
  JsonRecord& add(const std::string& key, std::int64_t value) {
    field(key);
    m_out << value;
    return *this;
  }
  JsonRecord& add(const std::string& key, int value) { return add(key, static_cast<std::int64_t>(value)); }
  JsonRecord& add(const std::string& key, bool value) {
    field(key);
    m_out << (value ? "true" : "false");
    return *this;
  }
  std::string str() const { return m_out.str() + "}"; }

 private:
  void field(const std::string& key) {
    m_out << (m_first ? "{" : ", ") << '"' << key << "\": ";
    m_first = false;
  }
  std::ostringstream m_out;
  bool m_first = true;
};

/// Appends records to a file (only where opened: rank 0), flushed per record so a killed run
/// keeps everything logged so far.
class MetricsWriter {
 public:
  /// `append`: keep the records already in the file (a resumed run continues its log).
  void open(const std::string& path, bool append = false) {
    m_file.open(path, std::ios::out | (append ? std::ios::app : std::ios::trunc));
    m_path = path;
  }
  bool is_open() const { return m_file.is_open(); }
  bool good() const { return m_file.good(); }
  void write(const JsonRecord& record) {
    if (!m_file.is_open()) return;
    m_file << record.str() << '\n';
    m_file.flush();
    if (!m_file.good() && m_error.empty()) m_error = std::strerror(errno);
  }
  /// Why a write failed ("" while every record reached the file).
  const std::string& error() const { return m_error; }
  const std::string& path() const { return m_path; }

 private:
  std::ofstream m_file;
  std::string m_path;
  std::string m_error;
};

}  // namespace a2sgd::train
