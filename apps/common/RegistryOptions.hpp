#pragma once
// The registered exchange methods' and models' options on a command line (header-only, for every
// app): a method's option <name> is --<method>-<name>, a model's is --<name>, declared once by the
// method or model itself (a2sgd/compress/ExchangeRegistry.hpp, a2sgd/train/ModelRegistry.hpp).
// Also the one spelling of their errors.

#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/train/ModelRegistry.hpp>

#include <boost/program_options.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace a2sgd::apps {

/// "--<method>-<option>": a method option's command-line name (without the dashes: flag()).
inline std::string method_flag(const std::string& method, const std::string& option) {
  return method + "-" + option;
}

/// An OptionError in the command line's words: "--<flag> <value>: <rule>", the flag being the
/// method's (--<method>-<option>) or, for a model's or the averaging policy's option, the
/// option's own (--<option>).
inline std::string command_line_text(const OptionError& e) {
  bool method = false;
  for (const auto& m : exchange_registry()) method = method || m.name == e.owner();
  return "--" + (method ? method_flag(e.owner(), e.option()) : e.option()) + (e.value().empty() ? "" : " ") +
         e.value() + ": " + e.rule();
}

/// Every registered method's options, for a Boost options group; values arrive as text.
inline void add_method_options(boost::program_options::options_description& group) {
  namespace po = boost::program_options;
  for (const auto& m : exchange_registry())
    for (const auto& o : m.options) {
      const std::string name = method_flag(m.name, o.name), help = m.name + ": " + o.help;
      if (o.is_switch)
        group.add_options()(name.c_str(), po::bool_switch(), help.c_str());
      else
        group.add_options()(name.c_str(), po::value<std::string>()->default_value(o.default_value), help.c_str());
    }
}

/// Every registered model's options (a name two models declare appears once; its default is then
/// the chosen model's, so the flag carries none).
inline void add_model_options(boost::program_options::options_description& group) {
  namespace po = boost::program_options;
  std::map<std::string, std::string> help;
  std::vector<std::string> order;
  std::map<std::string, bool> is_switch;
  for (const auto& k : train::model_registry())
    for (const auto& o : k.options) {
      if (!help.count(o.name)) order.push_back(o.name);
      std::string& h = help[o.name];
      h += (h.empty() ? "" : "; ") + k.name + ": " + o.help + (o.is_switch ? "" : " (default " + o.default_value + ")");
      is_switch[o.name] = o.is_switch;
    }
  for (const std::string& name : order) {
    if (is_switch[name])
      group.add_options()(name.c_str(), po::bool_switch(), help[name].c_str());
    else
      group.add_options()(name.c_str(), po::value<std::string>(), help[name].c_str());
  }
}

/// The averaging policy's options (a2sgd/compress/ModelAveraging.hpp), each --<option>.
inline void add_averaging_options(boost::program_options::options_description& group) {
  namespace po = boost::program_options;
  for (const auto& o : averaging_option_specs())
    group.add_options()(o.name.c_str(), po::value<std::string>()->default_value(o.default_value), o.help.c_str());
}

/// Whether a value came from the command line or a config file (not a default).
inline bool given(const boost::program_options::variables_map& vm, const std::string& name, bool is_switch) {
  const auto& v = vm[name];
  if (v.empty() || v.defaulted()) return false;
  return !is_switch || v.as<bool>();
}

inline std::string value_text(const boost::program_options::variables_map& vm, const std::string& name,
                              bool is_switch) {
  return is_switch ? (vm[name].as<bool>() ? "on" : "off") : vm[name].as<std::string>();
}

/// Every method's options as given, each method's set checked by the method (OptionError).
inline std::map<std::string, OptionValues> given_method_options(const boost::program_options::variables_map& vm) {
  std::map<std::string, OptionValues> out;
  for (const auto& m : exchange_registry()) {
    OptionValues values = default_options(m);
    for (const auto& o : m.options)
      if (given(vm, method_flag(m.name, o.name), o.is_switch))
        values.set(o.name, value_text(vm, method_flag(m.name, o.name), o.is_switch));
    if (m.check_options) m.check_options(values);
    out.emplace(m.name, std::move(values));
  }
  return out;
}

/// The averaging policy's options as given, with the chosen method's aliases of them
/// (ExchangeMethod::averaging_aliases, e.g. --a2sgd-average-every for --average-every): an alias
/// given alone sets the option, both given with different values are an OptionError.
inline OptionValues given_averaging_options(const boost::program_options::variables_map& vm,
                                            const ExchangeMethod& method, const OptionValues& method_values) {
  OptionValues values("averaging", averaging_option_specs());
  for (const auto& o : averaging_option_specs())
    if (given(vm, o.name, false)) values.set(o.name, vm[o.name].as<std::string>());
  for (const auto& [own, name] : method.averaging_aliases) {
    if (!method_values.given(own)) continue;
    if (values.given(name) && values.text(name) != method_values.text(own))
      throw OptionError("averaging", name, values.text(name),
                        "differs from --" + method_flag(method.name, own) + " " + method_values.text(own) +
                            " (the same setting by its older name): give one of them");
    values.set(name, method_values.text(own));
  }
  return values;
}

/// The chosen model's options as given; an option of another model only is an OptionError.
inline OptionValues given_model_options(const boost::program_options::variables_map& vm, const train::ModelKind& kind) {
  OptionValues values = train::default_options(kind);
  std::set<std::string> own;
  for (const auto& o : kind.options) {
    own.insert(o.name);
    if (given(vm, o.name, o.is_switch)) values.set(o.name, value_text(vm, o.name, o.is_switch));
  }
  for (const auto& other : train::model_registry())
    for (const auto& o : other.options)
      if (!own.count(o.name) && given(vm, o.name, o.is_switch))
        throw OptionError(
            kind.name, o.name, o.is_switch ? "" : vm[o.name].as<std::string>(),
            "not an option of the " + kind.name + " model (options that belong to --model " + other.name + ")");
  if (kind.check_options) kind.check_options(values);
  return values;
}

}  // namespace a2sgd::apps
