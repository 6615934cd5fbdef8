// Files a user points the runtime at that are not what they should be: a
// layout nested 100 000 deep or with a huge value, a directory or a device
// as a key file or a communicator configuration. Each is refused with an
// error naming the file, of bounded length, with status 2: no crash (139),
// no abort (134), no empty configuration, no endless read.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_util.hpp"
#include "runtime/auth.hpp"
#include "runtime/communicator.hpp"
#include "runtime/net.hpp"

namespace {

namespace fs = std::filesystem;
using ina_test::fresh_dir;
using ina_test::run_ina;
using ina_test::write_file;

std::string deep_json(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// Catches: recursion over a 100 000-deep value (quoting it in the error)
// overflowing the stack (SIGSEGV, status 139) in `ina switch --layout` and
// `ina ring-worker --layout`.
TEST(BadFiles, DeepLayoutIsRefusedByBothReaders) {
  const fs::path d = fresh_dir("deep_layout");
  const fs::path layout = d / "layout.json";
  write_file(layout, "{\"job\": " + deep_json(100000) + "}");
  const std::string want = "layout " + layout.string() + ": JSON nested 100001 levels deep; the limit is 64";
  const auto sw = run_ina("switch --listen 127.0.0.1:0 --scheme rina --layout " + layout.string() + " --rack 0 --quiet");
  EXPECT_EQ(sw.status, 2) << sw.output.substr(0, 400);
  EXPECT_NE(sw.output.find(want), std::string::npos) << sw.output.substr(0, 400);
  EXPECT_LT(sw.output.size(), 400u);
  const auto rw = run_ina("ring-worker --layout " + layout.string() + " --rank 0 --size 64 --barrier " +
                          (d / "bar").string() + " --timeout 2");
  EXPECT_EQ(rw.status, 2) << rw.output.substr(0, 400);
  EXPECT_NE(rw.output.find(want), std::string::npos) << rw.output.substr(0, 400);
  EXPECT_LT(rw.output.size(), 400u);
}

// A shallow layout with a huge value in a field: the error quotes at most
// 80 characters of it. Catches: the whole value in the message (a
// 300 KB error for a 300 KB value).
TEST(BadFiles, LayoutErrorsQuoteABoundedPartOfTheValue) {
  const fs::path d = fresh_dir("wide_layout");
  const fs::path layout = d / "layout.json";
  write_file(layout, "{\"job\": \"" + std::string(300000, 'a') + "\"}");
  const auto r = run_ina("switch --listen 127.0.0.1:0 --scheme rina --layout " + layout.string() + " --rack 0 --quiet");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("layout " + layout.string() + ": field 'job' = \"" + std::string(79, 'a') + "...: expected an "
                          "integer in 1..65535"),
            std::string::npos)
      << r.output.substr(0, 400);
  EXPECT_LT(r.output.size(), 400u);
}

// Catches: `ina key new DIR` and `ina key job --switch-key-file DIR` ending
// in an uncaught exception (abort, status 134).
TEST(BadFiles, KeyCommandsRefuseADirectory) {
  const fs::path d = fresh_dir("key_dir");
  const auto made = run_ina("key new " + d.string());
  EXPECT_EQ(made.status, 2) << made.output;
  EXPECT_NE(made.output.find("error: cannot write key file '" + d.string() + "': it is a directory"), std::string::npos)
      << made.output;
  const auto job = run_ina("key job --switch-key-file " + d.string() + " --job 1");
  EXPECT_EQ(job.status, 2) << job.output;
  EXPECT_NE(job.output.find("error: key file '" + d.string() + "' is a directory, not a file of 64 hex digits"),
            std::string::npos)
      << job.output;
  EXPECT_FALSE(fs::exists(d / "switch.key"));
}

// A key file is a small regular file. Catches: reading /dev/zero without end,
// and an oversized file read whole before it is refused.
TEST(BadFiles, KeyFileMustBeASmallRegularFile) {
  const fs::path d = fresh_dir("key_files");
  try {
    ina::rt::read_key_file("/dev/zero");
    ADD_FAILURE() << "/dev/zero read as a key";
  } catch (const ina::rt::RuntimeError& e) {
    EXPECT_STREQ(e.what(), "key file '/dev/zero' is not a regular file (a device, FIFO or socket); give a file of 64 hex "
                           "digits ('ina key new FILE' makes one)");
  }
  const fs::path big = d / "big.key";
  write_file(big, std::string(2000, 'a'));
  try {
    ina::rt::read_key_file(big.string());
    ADD_FAILURE() << "a 2000-byte key file was read";
  } catch (const ina::rt::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("key file '" + big.string() + "' is 2000 bytes: more than the 1024 bytes"),
              std::string::npos)
        << e.what();
  }
  const auto sw = run_ina("switch --listen 127.0.0.1:0 --key-file /dev/zero --quiet");
  EXPECT_EQ(sw.status, 2);
  EXPECT_NE(sw.output.find("key file '/dev/zero' is not a regular file"), std::string::npos) << sw.output;
  // A good key with whitespace around it still reads.
  const fs::path ok = d / "ok.key";
  write_file(ok, "\n  " + std::string(64, 'f') + "  \n");
  EXPECT_EQ(ina::rt::read_key_file(ok.string())[0], 0xff);
}

// A directory (or a device) as the communicator's configuration: refused
// naming it, by `ina worker --config`, by INA_CONFIG, and by
// CommConfig::from_toml_file (what Communicator("some_dir") reads). Catches:
// a directory read as an empty configuration (every setting silently default).
TEST(BadFiles, ConfigurationMustBeAFile) {
  const fs::path d = fresh_dir("config_dir");
  EXPECT_THROW(
      {
        try {
          ina::CommConfig::from_toml_file(d.string());
        } catch (const ina::RuntimeError& e) {
          EXPECT_EQ(std::string(e.what()), "communicator configuration '" + d.string() +
                                               "' is a directory, not a file of TOML settings ([communicator], [faults])");
          throw;
        }
      },
      ina::RuntimeError);
  EXPECT_THROW(ina::CommConfig::from_toml_file("/dev/zero"), ina::RuntimeError);
  const auto w = run_ina("worker --config " + d.string() + " --size 64");
  EXPECT_EQ(w.status, 2) << w.output;
  EXPECT_NE(w.output.find("communicator configuration '" + d.string() + "' is a directory"), std::string::npos)
      << w.output;
  const auto e = ina_test::run_command("INA_CONFIG=" + d.string() + " " + INA_BINARY + " worker --size 64");
  EXPECT_EQ(e.status, 2) << e.output;
  EXPECT_NE(e.output.find("INA_CONFIG: communicator configuration '" + d.string() + "' is a directory"),
            std::string::npos)
      << e.output;
}

}  // namespace
