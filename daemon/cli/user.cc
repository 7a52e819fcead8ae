// gaitwatch user: the console's users (console/access.h), written straight
// into the store's SQLite file, so that the first admin exists before the
// daemon starts; a running daemon reads the table on every request.
//   gaitwatch user add NAME --role viewer|carer|admin [--db PATH | --config FILE] [--password-file F]
//   gaitwatch user passwd NAME [...]
//   gaitwatch user role NAME ROLE [...]
//   gaitwatch user remove NAME [...]
//   gaitwatch user list [--json] [...]
// A password is never an argument (process lists show those): it comes from
// --password-file (its first line) or stdin, asked twice without echo on a
// terminal.
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "config/config.h"
#include "console/access.h"
#include "daemon/cli/cli.h"

namespace gw::cli {
namespace {

using nlohmann::json;

struct UserOptions {
  std::string db;
  std::string config;
  std::string name;
  std::string role;
  std::string password_file;
  bool json = false;
};

std::string store_path(const UserOptions& o) {
  if (!o.db.empty()) return o.db;
  const std::string config = client_config_path(o.config);
  if (config.empty())
    throw UsageError("say where the store is: --db PATH (the daemon's storage.path) or --config FILE");
  return config::load_config(config).storage.path;
}

console::Role role_of(const std::string& text) {
  const auto role = console::parse_role(text);
  if (!role) throw UsageError("--role must be viewer, carer or admin, not '" + text + "'");
  return *role;
}

std::string read_line_without_echo(const char* prompt) {
  std::fprintf(stderr, "%s", prompt);
  termios old_mode{};
  const bool terminal = ::tcgetattr(STDIN_FILENO, &old_mode) == 0;
  if (terminal) {
    termios quiet = old_mode;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
  }
  std::string line;
  std::getline(std::cin, line);
  if (terminal) {
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &old_mode);
    std::fprintf(stderr, "\n");
  }
  return line;
}

std::string new_password(const UserOptions& o) {
  std::string password;
  if (!o.password_file.empty()) {
    std::ifstream in(o.password_file);
    if (!in) throw Error("cannot read " + o.password_file);
    std::getline(in, password);
  } else if (::isatty(STDIN_FILENO)) {
    password = read_line_without_echo("new password: ");
    if (read_line_without_echo("again: ") != password) throw Error("the two passwords differ");
  } else {
    std::getline(std::cin, password);
  }
  if (!password.empty() && password.back() == '\r') password.pop_back();
  return password;
}

void add_store_flags(CLI::App& cmd, UserOptions& o) {
  cmd.add_option("--db", o.db, "the store's SQLite file (the daemon's storage.path)");
  cmd.add_option("--config", o.config,
                 "the daemon's config, for storage.path (default " GW_INSTALLED_CONFIG
                 " when it exists)");
}

}  // namespace

void add_user(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "user", "the console's users and their roles (viewer, carer, admin), in the store's file");
  cmd->require_subcommand(1);

  auto add = std::make_shared<UserOptions>();
  auto* add_cmd = cmd->add_subcommand("add", "make a user; the password comes from stdin or a file");
  add_cmd->add_option("name", add->name, "the login name: letters, digits, '.', '_', '-'")->required();
  add_cmd->add_option("--role", add->role, "viewer (reads), carer (also acknowledges, resolves, "
                                           "marks) or admin (also manages wearers)")
      ->required();
  add_cmd->add_option("--password-file", add->password_file, "read the password from this file's first line");
  add_store_flags(*add_cmd, *add);
  on_run(*add_cmd, exit_code, [add] {
    const console::Role role = role_of(add->role);
    console::UserStore users(store_path(*add));
    users.add(add->name, role, new_password(*add));
    std::printf("user %s added (%s)\n", add->name.c_str(), console::name(role));
    return 0;
  });

  auto passwd = std::make_shared<UserOptions>();
  auto* passwd_cmd = cmd->add_subcommand("passwd", "set a user's password (their sessions end)");
  passwd_cmd->add_option("name", passwd->name, "the login name")->required();
  passwd_cmd->add_option("--password-file", passwd->password_file, "read the password from this file's first line");
  add_store_flags(*passwd_cmd, *passwd);
  on_run(*passwd_cmd, exit_code, [passwd] {
    console::UserStore users(store_path(*passwd));
    if (!users.find(passwd->name)) throw Error("no user '" + passwd->name + "'");
    users.set_password(passwd->name, new_password(*passwd));
    std::printf("password of %s changed\n", passwd->name.c_str());
    return 0;
  });

  auto role = std::make_shared<UserOptions>();
  auto* role_cmd = cmd->add_subcommand("role", "change a user's role (their sessions end)");
  role_cmd->add_option("name", role->name, "the login name")->required();
  role_cmd->add_option("role", role->role, "viewer, carer or admin")->required();
  add_store_flags(*role_cmd, *role);
  on_run(*role_cmd, exit_code, [role] {
    const console::Role new_role = role_of(role->role);
    console::UserStore(store_path(*role)).set_role(role->name, new_role);
    std::printf("%s is now %s\n", role->name.c_str(), console::name(new_role));
    return 0;
  });

  auto remove = std::make_shared<UserOptions>();
  auto* remove_cmd = cmd->add_subcommand("remove", "remove a user (their sessions end)");
  remove_cmd->add_option("name", remove->name, "the login name")->required();
  add_store_flags(*remove_cmd, *remove);
  on_run(*remove_cmd, exit_code, [remove] {
    console::UserStore(store_path(*remove)).remove(remove->name);
    std::printf("user %s removed\n", remove->name.c_str());
    return 0;
  });

  auto list = std::make_shared<UserOptions>();
  auto* list_cmd = cmd->add_subcommand("list", "the users and their roles (never the hashes)");
  list_cmd->add_flag("--json", list->json, "one JSON object per user");
  add_store_flags(*list_cmd, *list);
  on_run(*list_cmd, exit_code, [list] {
    const auto users = console::UserStore(store_path(*list)).list();
    for (const console::User& user : users) {
      if (list->json)
        std::cout << json{{"name", user.name}, {"role", console::name(user.role)}}.dump() << "\n";
      else
        std::printf("%-24s %s\n", user.name.c_str(), console::name(user.role));
    }
    if (!list->json) std::printf("%zu users\n", users.size());
    return 0;
  });
}

}  // namespace gw::cli
