#pragma once
/// @file Options.hpp
/// Options declared once, with what they configure (an exchange method, a model), and read from
/// text: a program or an application's command line fills OptionValues, the method or model
/// reads them typed and checked. Errors name the owner and the option as declared; applications
/// turn them into their own spelling (a2sgd-train: --<owner>-<option>).

#include <a2sgd/core/Error.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace a2sgd {

/// One declared option.
struct OptionSpec {
  OptionSpec() = default;
  /// `{name, default, help}`, optionally the choices and whether it is a switch.
  OptionSpec(std::string name_, std::string default_value_, std::string help_, std::vector<std::string> choices_ = {},
             bool is_switch_ = false)
      : name(std::move(name_)),
        default_value(std::move(default_value_)),
        help(std::move(help_)),
        choices(std::move(choices_)),
        is_switch(is_switch_) {}

  std::string name;                  ///< e.g. "ratio"; lower case, words joined by '-'
  std::string default_value;         ///< as text; "" for a switch that is off
  std::string help;                  ///< one line; says the unit and the range
  std::vector<std::string> choices;  ///< the values it takes, for help texts (the owner checks them)
  bool is_switch = false;            ///< present or absent, no value (a command line's --flag)
};

/// A value that an option does not accept: what() is "<owner> <option> <value>: <rule>";
/// the parts are kept so that an application can say it in its own words.
class OptionError : public InvalidArgument {
 public:
  OptionError(std::string owner, std::string option, std::string value, std::string rule);
  const std::string& owner() const noexcept { return m_owner; }
  const std::string& option() const noexcept { return m_option; }
  const std::string& value() const noexcept { return m_value; }
  const std::string& rule() const noexcept { return m_rule; }

 private:
  std::string m_owner, m_option, m_value, m_rule;
};

/// The values of one owner's options, as text, defaults filled from the specs.
class OptionValues {
 public:
  OptionValues() = default;
  /// Every option at its default; `owner` names them in errors.
  OptionValues(std::string owner, const std::vector<OptionSpec>& specs);

  /// Sets an option; throws OptionError for a name that is not declared.
  void set(const std::string& name, const std::string& value);
  /// Whether set() was called for it (else it holds its default).
  bool given(const std::string& name) const;
  /// Sets an option that was neither given nor suggested before (a recommended value replacing
  /// the default; the first recommendation wins).
  void suggest(const std::string& name, const std::string& value);

  const std::string& text(const std::string& name) const;
  /// Typed reads; a value that does not parse whole is an OptionError.
  double number(const std::string& name) const;
  std::int64_t integer(const std::string& name) const;
  bool on(const std::string& name) const;  ///< a switch, or "on"/"off" (also true/false, 1/0)
  /// OptionError(rule) for `name` unless `ok`.
  void require(bool ok, const std::string& name, const std::string& rule) const;

  const std::string& owner() const noexcept { return m_owner; }
  /// Every option as (name, value), in declaration order.
  std::vector<std::pair<std::string, std::string>> entries() const;

 private:
  const OptionSpec& spec(const std::string& name) const;
  std::string m_owner;
  std::vector<OptionSpec> m_specs;
  std::map<std::string, std::string> m_values;
  std::map<std::string, bool> m_given;
  std::map<std::string, bool> m_suggested;
};

}  // namespace a2sgd
