// Users, password hashes, sessions and the login limit (console/access.h).
#include <catch2/catch.hpp>
#include <chrono>

#include "console/access.h"
#include "sinks/store.h"
#include "tests/common/temp_dir.h"

using namespace gw::console;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_CASE("passwords are stored as Argon2id hashes that verify only the password", "[console]") {
  const std::string hash = hash_password("correct horse battery");
  CHECK(hash.rfind("$argon2id$", 0) == 0);
  CHECK(hash.find("correct horse") == std::string::npos);
  CHECK(verify_password(hash, "correct horse battery"));
  CHECK_FALSE(verify_password(hash, "correct horse batterz"));
  CHECK_FALSE(verify_password(hash, ""));
  CHECK(hash_password("correct horse battery") != hash);  // salted
}

TEST_CASE("roles are ordered and named", "[console]") {
  CHECK(allows(Role::kAdmin, Role::kCarer));
  CHECK(allows(Role::kCarer, Role::kCarer));
  CHECK_FALSE(allows(Role::kViewer, Role::kCarer));
  CHECK_FALSE(allows(Role::kCarer, Role::kAdmin));
  for (Role role : {Role::kViewer, Role::kCarer, Role::kAdmin}) CHECK(parse_role(name(role)) == role);
  CHECK_FALSE(parse_role("root").has_value());
}

TEST_CASE("the users table: add, find, verify, change, remove", "[console]") {
  gw::test::TempDir dir("gw_access");
  const std::string db = dir.file("hits.db");
  UserStore users(db);
  users.add("ana", Role::kAdmin, "ana-password-1");
  users.add("bo.b-2", Role::kViewer, "bob-password-1");
  const auto ana = users.find("ana");
  REQUIRE(ana);
  CHECK(ana->role == Role::kAdmin);
  CHECK(users.list().size() == 2);
  CHECK(users.list().front().name == "ana");
  CHECK(users.verify("ana", "ana-password-1").has_value());
  CHECK_FALSE(users.verify("ana", "bob-password-1").has_value());
  CHECK_FALSE(users.verify("nobody", "ana-password-1").has_value());

  const auto reason = [&](auto&& f) {
    try {
      f();
    } catch (const AccessError& e) {
      return e.reason();
    }
    FAIL("no AccessError");
    return AccessError::Reason::kBadName;
  };
  CHECK(reason([&] { users.add("ana", Role::kViewer, "another-password"); }) ==
        AccessError::Reason::kDuplicateUser);
  CHECK(reason([&] { users.add("cy", Role::kViewer, "short"); }) == AccessError::Reason::kWeakPassword);
  CHECK(reason([&] { users.add("c y", Role::kViewer, "long-enough-1"); }) == AccessError::Reason::kBadName);
  CHECK(reason([&] { users.add("", Role::kViewer, "long-enough-1"); }) == AccessError::Reason::kBadName);
  CHECK(reason([&] { users.add(std::string(65, 'a'), Role::kViewer, "long-enough-1"); }) ==
        AccessError::Reason::kBadName);
  CHECK(reason([&] { users.set_password("nobody", "long-enough-1"); }) == AccessError::Reason::kUnknownUser);
  CHECK(reason([&] { users.remove("nobody"); }) == AccessError::Reason::kUnknownUser);

  // Each change bumps the generation (sessions from before it end).
  const std::int64_t first = ana->generation;
  users.set_password("ana", "ana-password-2");
  CHECK(users.find("ana")->generation == first + 1);
  CHECK(users.verify("ana", "ana-password-2").has_value());
  CHECK_FALSE(users.verify("ana", "ana-password-1").has_value());
  users.set_role("ana", Role::kCarer);
  CHECK(users.find("ana")->generation == first + 2);
  CHECK(users.find("ana")->role == Role::kCarer);

  // Another connection on the same file (the CLI while the daemon runs) sees it all.
  UserStore other(db);
  CHECK(other.find("ana")->role == Role::kCarer);
  other.remove("bo.b-2");
  CHECK_FALSE(users.find("bo.b-2").has_value());
  // The file is the hit store's: it opens as one, at the current schema.
  gw::pipeline::HitStore store(db, /*read_only=*/true);
  CHECK(store.schema_version() == gw::pipeline::kStoreSchemaVersion);
  CHECK(store.users().size() == 1);
}

TEST_CASE("sessions end when idle, when too old, and when evicted", "[console]") {
  SessionTable table(10s, 60s, 2);
  const auto t0 = Clock::now();
  const User ana{"ana", Role::kCarer, 1};
  const Session a = table.create(ana, t0);
  CHECK(a.token.size() == 64);
  CHECK(a.csrf.size() == 64);
  CHECK(a.token != a.csrf);
  CHECK(table.find(a.token, t0 + 9s).has_value());
  CHECK(table.find(a.token, t0 + 18s).has_value());   // 9 s after it was last seen
  CHECK_FALSE(table.find(a.token, t0 + 29s).has_value());  // 11 s idle
  CHECK(table.size() == 0);

  const Session b = table.create(ana, t0);
  for (int k = 1; k <= 6; ++k) REQUIRE(table.find(b.token, t0 + k * 9s).has_value());
  CHECK_FALSE(table.find(b.token, t0 + 63s).has_value());  // older than max_age

  const Session c = table.create(ana, t0);
  const Session d = table.create({"bo", Role::kViewer, 1}, t0 + 1s);
  table.find(c.token, t0 + 2s);  // c used last
  const Session e = table.create(ana, t0 + 3s);
  CHECK(table.evicted() == 1);
  CHECK_FALSE(table.find(d.token, t0 + 3s).has_value());
  CHECK(table.find(c.token, t0 + 3s).has_value());
  CHECK(table.remove_user("ana") == 2);
  CHECK_FALSE(table.find(e.token, t0 + 3s).has_value());

  CHECK(csrf_matches(c, c.csrf));
  CHECK_FALSE(csrf_matches(c, e.csrf));
  CHECK_FALSE(csrf_matches(c, ""));
  CHECK_FALSE(csrf_matches(c, c.csrf.substr(1)));
}

TEST_CASE("the login limiter blocks an address after its failures until the window ends", "[console]") {
  LoginLimiter limiter(3, 60s, 2);
  const auto t0 = Clock::now();
  for (int i = 0; i < 3; ++i) {
    CHECK_FALSE(limiter.blocked("10.0.0.1", t0 + i * 1s).has_value());
    limiter.failed("10.0.0.1", t0 + i * 1s);
  }
  const auto wait = limiter.blocked("10.0.0.1", t0 + 10s);
  REQUIRE(wait.has_value());
  CHECK(wait->count() == 50);
  CHECK_FALSE(limiter.blocked("10.0.0.2", t0 + 10s).has_value());  // others may try
  CHECK_FALSE(limiter.blocked("10.0.0.1", t0 + 61s).has_value());  // the window is over
  limiter.failed("10.0.0.1", t0 + 61s);  // a new window begins
  CHECK_FALSE(limiter.blocked("10.0.0.1", t0 + 62s).has_value());

  limiter.failed("10.0.0.3", t0);
  limiter.failed("10.0.0.3", t0);
  limiter.succeeded("10.0.0.3");
  limiter.failed("10.0.0.3", t0);
  CHECK_FALSE(limiter.blocked("10.0.0.3", t0).has_value());  // success cleared it

  // Bounded: tracking a third address forgets the oldest.
  LoginLimiter small(1, 60s, 2);
  small.failed("a", t0);
  small.failed("b", t0 + 1s);
  small.failed("c", t0 + 2s);
  CHECK_FALSE(small.blocked("a", t0 + 3s).has_value());
  CHECK(small.blocked("b", t0 + 3s).has_value());
  CHECK(small.blocked("c", t0 + 3s).has_value());
}
