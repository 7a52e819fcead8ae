// Command-line conventions shared by gaitwatch and gaitwatchd:
//   exit 0  --help, --version
//   exit 2  a usage error (unknown subcommand or option, missing required
//           option, bad value): one message on stderr; a mistyped subcommand
//           gets "unknown subcommand 'replya', did you mean 'replay'?"
//   exit 1  a runtime error (the command ran and failed)
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "config/config.h"

namespace gw::cli {

constexpr int kExitUsage = 2;

// A usage error found after parsing (a combination of flags the command
// cannot run with): thrown out of a subcommand's callback, it ends
// parse_command_line with kExitUsage and `message` on stderr.
class UsageError : public CLI::ParseError {
 public:
  explicit UsageError(std::string message)
      : CLI::ParseError("UsageError", std::move(message), kExitUsage) {}
};

// An option that takes one of the words of a config choice (config/config.h),
// parsed by the config's own parser into `target` (an E, or a
// std::optional<E> for an override that may be absent); any other word is a
// usage error listing the words, as the config file's error does.
template <typename E, typename Target>
CLI::Option* add_choice_option(CLI::App& app, const std::string& name, Target& target,
                               const std::string& description) {
  return app
      .add_option_function<std::string>(
          name,
          [&target, name](const std::string& word) {
            const std::optional<E> choice = config::parse_choice<E>(word);
            if (!choice)
              throw CLI::ValidationError(
                  name, "must be one of " + config::choice_list<E>() + ", got '" + word + "'");
            target = *choice;
          },
          description)
      ->type_name("{" + config::choice_list<E>() + "}");
}

// Parses argv, which runs the chosen subcommand's callback. Returns nullopt
// when parsing succeeded (the program goes on), else the exit code to end
// with: 0 after --help or --version (printed), kExitUsage after a usage error
// (reported on stderr).
std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv);

}  // namespace gw::cli
