#pragma once
// Messages of Boost.Program_options errors that are safe to build from any user input.
//
// Boost formats an error by replacing placeholders such as %value% in its template, one
// occurrence at a time, until none is left. When the user's own text holds a placeholder
// (`--steps %value%`, a config line `%option% = 1`), every replacement brings the placeholder back
// and what() never returns. The user's text is therefore masked before formatting and restored in
// the finished message.

#include <a2sgd/core/Error.hpp>

#include <boost/program_options/errors.hpp>
#include <boost/program_options/parsers.hpp>
#include <boost/program_options/variables_map.hpp>

#include <algorithm>
#include <map>
#include <string>

namespace a2sgd::apps {

namespace detail {

/// Reaches the substituted values (a protected member) of an error that was thrown.
struct OptionErrorAccess : boost::program_options::error_with_option_name {
  static std::map<std::string, std::string>& values(boost::program_options::error_with_option_name& e) {
    return e.*(&OptionErrorAccess::m_substitutions);
  }
};

}  // namespace detail

/// The message of `e`, built without letting placeholders in the user's text re-expand.
inline std::string option_error_message(boost::program_options::error& e) {
  auto* named = dynamic_cast<boost::program_options::error_with_option_name*>(&e);
  if (named == nullptr) return e.what();
  // A unit separator never forms a placeholder; it stands for '%' while Boost formats.
  constexpr char mask = '\x1f';
  for (auto& entry : detail::OptionErrorAccess::values(*named))
    std::replace(entry.second.begin(), entry.second.end(), '%', mask);
  std::string message = e.what();
  std::replace(message.begin(), message.end(), mask, '%');
  return message;
}

/// Parses the command line against `desc` into `vm` (store and notify); a Boost error becomes an
/// InvalidArgument with option_error_message's text.
inline void parse_command_line(int argc, char** argv, const boost::program_options::options_description& desc,
                               boost::program_options::variables_map& vm) {
  try {
    boost::program_options::store(boost::program_options::parse_command_line(argc, argv, desc), vm);
    boost::program_options::notify(vm);
  } catch (boost::program_options::error& e) {
    throw InvalidArgument(option_error_message(e));
  }
}

}  // namespace a2sgd::apps
