// The example programs' command-line reader (examples/common/args.h): flag tables, the
// conventional short spellings, and the errors a user sees; byte counts with K/M/G/T suffixes
// (examples/common/byte_size.h).

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "examples/common/args.h"
#include "examples/common/byte_size.h"
#include "examples/common/grammar_flags.h"
#include "examples/common/sampling_flags.h"
#include "examples/common/speculative_flags.h"

namespace pagoda::cli {
namespace {

// Args over a command line written as words (the program name first).
Args parse(std::vector<std::string> words, std::set<std::string> with_value, std::set<std::string> switches,
           std::map<std::string, std::string> aliases = {}) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return Args(int(argv.size()), argv.data(), std::move(with_value), std::move(switches), std::move(aliases));
}

TEST(CliArgs, AFlagSetHoldsEveryNameOfEveryTable) {
  const std::array own{"--model", "--temp"};
  const std::set<std::string> flags = flag_set({own, kSamplingFlags, kSpeculativeFlags, kGrammarFlags});
  EXPECT_EQ(flags.size(), std::size(kSamplingFlags) + std::size(kSpeculativeFlags) + std::size(kGrammarFlags) + 1);
  for (const char* name : kSpeculativeFlags) EXPECT_TRUE(flags.count(name)) << name;
  EXPECT_TRUE(flags.count("--model"));
  EXPECT_TRUE(flags.count("--json-schema-file"));
}

TEST(CliArgs, ConventionalShortSpellingsReachTheirLongFlags) {
  const Args args = parse({"prog", "-m", "model.gguf", "-t", "3", "-c", "512", "-h", "--lookup"},
                          {"--model", "--threads", "--ctx-size"}, {"--help", "--spec-ngram"});
  EXPECT_EQ(args.get("--model"), "model.gguf");
  EXPECT_EQ(args.number("--threads", 0), 3);
  EXPECT_EQ(args.number("--ctx-size", 0), 512);
  EXPECT_TRUE(args.has("--help"));
  EXPECT_TRUE(args.has("--spec-ngram"));
}

TEST(CliArgs, AProgramsOwnAliasOverridesTheConventionalOne) {
  const Args args = parse({"prog", "-c", "16"}, {"--concurrency", "--ctx-size"}, {}, {{"-c", "--concurrency"}});
  EXPECT_EQ(args.number("--concurrency", 0), 16);
  EXPECT_FALSE(args.has("--ctx-size"));
}

TEST(CliArgs, AConventionalSpellingWithoutItsLongFlagIsAnUnknownArgument) {
  try {
    parse({"prog", "-c", "512"}, {"--model"}, {"--help"});
    FAIL() << "-c was accepted by a program without --ctx-size";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown argument '-c'"), std::string::npos) << e.what();
  }
}

TEST(CliArgs, AFlagWithoutItsValueSaysSo) {
  try {
    parse({"prog", "--model"}, {"--model"}, {});
    FAIL() << "--model without a value was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--model needs a value"), std::string::npos) << e.what();
  }
}

TEST(CliArgs, ByteSizesTakeBinarySuffixes) {
  EXPECT_EQ(parse_byte_size("--size", "0"), 0u);
  EXPECT_EQ(parse_byte_size("--size", "123456789"), 123456789u);
  EXPECT_EQ(parse_byte_size("--size", "4K"), 4096u);
  EXPECT_EQ(parse_byte_size("--size", "512M"), uint64_t(512) << 20);
  EXPECT_EQ(parse_byte_size("--size", "16G"), uint64_t(16) << 30);
  EXPECT_EQ(parse_byte_size("--size", "16g"), uint64_t(16) << 30);
  EXPECT_EQ(parse_byte_size("--size", "2T"), uint64_t(2) << 40);
}

TEST(CliArgs, ByteSizeGarbageSaysWhatIsExpected) {
  for (const std::string text :
       {"", "G", "12Q", "1.5G", "-1", "16GB", " 16G", "16G ", "99999999999999999999", "16777216T"}) {
    try {
      parse_byte_size("--size", text);
      ADD_FAILURE() << "'" << text << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--size needs a byte count such as"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("got '" + text + "'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace pagoda::cli
