#include <a2sgd/core/Options.hpp>

#include <cerrno>
#include <cstdlib>

namespace a2sgd {

OptionError::OptionError(std::string owner, std::string option, std::string value, std::string rule)
    : InvalidArgument(owner + " " + option + (value.empty() ? "" : " " + value) + ": " + rule),
      m_owner(std::move(owner)),
      m_option(std::move(option)),
      m_value(std::move(value)),
      m_rule(std::move(rule)) {}

OptionValues::OptionValues(std::string owner, const std::vector<OptionSpec>& specs)
    : m_owner(std::move(owner)), m_specs(specs) {
  for (const OptionSpec& s : m_specs) {
    m_values[s.name] = s.default_value;
    m_given[s.name] = false;
  }
}

const OptionSpec& OptionValues::spec(const std::string& name) const {
  for (const OptionSpec& s : m_specs)
    if (s.name == name) return s;
  std::string known;
  for (const OptionSpec& s : m_specs) known += (known.empty() ? "" : ", ") + s.name;
  throw OptionError(m_owner, name, "", "no such option (" + (known.empty() ? "it has none" : "valid: " + known) + ")");
}

void OptionValues::set(const std::string& name, const std::string& value) {
  spec(name);
  m_values[name] = value;
  m_given[name] = true;
}

bool OptionValues::given(const std::string& name) const {
  spec(name);
  return m_given.at(name);
}

void OptionValues::suggest(const std::string& name, const std::string& value) {
  if (given(name) || m_suggested[name]) return;
  set(name, value);
  m_given[name] = false;
  m_suggested[name] = true;
}

const std::string& OptionValues::text(const std::string& name) const {
  spec(name);
  return m_values.at(name);
}

double OptionValues::number(const std::string& name) const {
  const std::string& v = text(name);
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE) require(false, name, "not a number");
  return x;
}

std::int64_t OptionValues::integer(const std::string& name) const {
  const std::string& v = text(name);
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE) require(false, name, "not an integer");
  return x;
}

bool OptionValues::on(const std::string& name) const {
  const std::string& v = text(name);
  if (v == "on" || v == "true" || v == "1" || v == "yes") return true;
  if (v == "off" || v == "false" || v == "0" || v == "no" || v.empty()) return false;
  require(false, name, "is not on/off");
  return false;
}

void OptionValues::require(bool ok, const std::string& name, const std::string& rule) const {
  if (!ok) throw OptionError(m_owner, name, m_values.count(name) ? m_values.at(name) : "", rule);
}

std::vector<std::pair<std::string, std::string>> OptionValues::entries() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const OptionSpec& s : m_specs) out.emplace_back(s.name, m_values.at(s.name));
  return out;
}

}  // namespace a2sgd
