// `gaitwatch user` as a process on a store file in a temp folder.
#include <catch2/catch.hpp>
#include <fstream>

#include <nlohmann/json.hpp>

#include "console/access.h"
#include "tests/common/temp_dir.h"
#include "tests/daemon/process.h"

namespace {
const std::string kTool = std::string(GW_BINARY_DIR) + "/daemon/gaitwatch";
}

TEST_CASE("gaitwatch user manages the console's users in the store file", "[console]") {
  gw::test::TempDir dir("gw_user_cli");
  const std::string db = dir.file("hits.db");
  const auto run = [&](std::vector<std::string> argv, const std::string& tag) {
    argv.insert(argv.begin(), kTool);
    return gw::test::run_process(argv, dir.path(), tag, std::chrono::seconds(60));
  };
  std::ofstream(dir.file("pw")) << "first-password-1\n";
  auto r = run({"user", "add", "ana", "--role", "carer", "--db", db, "--password-file", dir.file("pw")}, "add");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("user ana added (carer)") != std::string::npos);

  // From stdin (not a terminal): one line.
  r = gw::test::run_process({"/bin/sh", "-c", "echo 'viewer-password-1' | " + kTool + " user add vic --role viewer --db " + db},
                            dir.path(), "stdin", std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.code == 0);

  r = run({"user", "list", "--json", "--db", db}, "list");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("argon2") == std::string::npos);  // never the hashes
  std::istringstream lines(r.out);
  std::string line;
  std::vector<nlohmann::json> users;
  while (std::getline(lines, line)) users.push_back(nlohmann::json::parse(line));
  REQUIRE(users.size() == 2);
  CHECK(users[0] == nlohmann::json{{"name", "ana"}, {"role", "carer"}});
  CHECK(users[1] == nlohmann::json{{"name", "vic"}, {"role", "viewer"}});

  {
    gw::console::UserStore store(db);
    CHECK(store.verify("ana", "first-password-1").has_value());
    CHECK(store.verify("vic", "viewer-password-1").has_value());
  }
  std::ofstream(dir.file("pw2")) << "second-password-2\n";
  REQUIRE(run({"user", "passwd", "ana", "--db", db, "--password-file", dir.file("pw2")}, "passwd").code == 0);
  REQUIRE(run({"user", "role", "vic", "admin", "--db", db}, "role").code == 0);
  {
    gw::console::UserStore store(db);
    CHECK_FALSE(store.verify("ana", "first-password-1").has_value());
    CHECK(store.verify("ana", "second-password-2").has_value());
    CHECK(store.find("vic")->role == gw::console::Role::kAdmin);
  }
  REQUIRE(run({"user", "remove", "vic", "--db", db}, "remove").code == 0);

  // Errors: a message and a nonzero exit.
  r = run({"user", "add", "ana", "--role", "carer", "--db", db, "--password-file", dir.file("pw")}, "dup");
  CHECK(r.code == 1);
  CHECK(r.err.find("exists") != std::string::npos);
  std::ofstream(dir.file("short")) << "short\n";
  r = run({"user", "add", "cy", "--role", "carer", "--db", db, "--password-file", dir.file("short")}, "weak");
  CHECK(r.code == 1);
  CHECK(r.err.find("at least 10") != std::string::npos);
  r = run({"user", "add", "cy", "--role", "nurse", "--db", db, "--password-file", dir.file("pw")}, "role");
  CHECK(r.code == 2);
  CHECK(r.err.find("viewer, carer or admin") != std::string::npos);
  r = run({"user", "remove", "nobody", "--db", db}, "unknown");
  CHECK(r.code == 1);
  CHECK(r.err.find("no user 'nobody'") != std::string::npos);
}
