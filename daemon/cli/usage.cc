#include "daemon/cli/usage.h"

#include <filesystem>
#include <iostream>
#include <vector>

#include "common/spelling.h"

namespace gw::cli {
namespace {

// Where argv names a subcommand that `app` (or a chosen subcommand of it)
// does not have although it requires one: that app and the word.
struct UnknownSubcommand {
  const CLI::App* parent = nullptr;
  std::string word;
};

UnknownSubcommand find_unknown_subcommand(const CLI::App& app, int argc,
                                          const char* const* argv) {
  const CLI::App* current = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() > 1 && arg[0] == '-') {
      // An option's separate value is not a subcommand.
      const std::string name = arg.substr(0, arg.find('='));
      const CLI::Option* option = current->get_option_no_throw(name);
      if (option && name == arg && option->get_items_expected_max() > 0) ++i;
      continue;
    }
    if (current->get_require_subcommand_min() == 0) break;
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : current->get_subcommands([](const CLI::App*) { return true; }))
      if (sub->check_name(arg)) next = sub;
    if (!next) return {current, arg};
    current = next;
  }
  return {};
}

std::string unknown_subcommand_message(const UnknownSubcommand& unknown) {
  std::vector<std::string> names;
  for (const CLI::App* sub :
       unknown.parent->get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  std::string message = "unknown subcommand '" + unknown.word + "'";
  const std::string best = closest_match(unknown.word, names);
  if (!best.empty()) return message + ", did you mean '" + best + "'?";
  message += " (one of:";
  for (const std::string& name : names) message += " " + name;
  return message + ")";
}

}  // namespace

std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    const UnknownSubcommand unknown = find_unknown_subcommand(app, argc, argv);
    if (unknown.parent) {
      const std::string program = std::filesystem::path(argv[0]).filename().string();
      std::cerr << program << ": " << unknown_subcommand_message(unknown) << "\n"
                << "Run with --help for more information.\n";
    } else {
      app.exit(e);
    }
    return kExitUsage;
  }
}

}  // namespace gw::cli
