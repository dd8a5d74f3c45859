#include <gtest/gtest.h>

#include <algorithm>

#include "optireduce/engine/config/config.hpp"

namespace optireduce {
namespace {

TEST(Config, DefaultsWhenNothingIsSet) {
  auto r = parse_config({{"PATH", "/bin"}, {"UCX_TLS", "tcp"}});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.config.mode, Mode::bounded);
  EXPECT_EQ(r.config.transport, TransportKind::automatic);
  EXPECT_EQ(r.config.min_bytes, 1u << 20);
  EXPECT_EQ(r.config.chunk_bytes, 1u << 20);
  EXPECT_EQ(r.config.timeout_ms, 60000u);
  EXPECT_TRUE(r.config.report_path.empty());
  EXPECT_EQ(r.config.log_level, LogLevel::warn);
  for (const auto& p : parameters()) EXPECT_EQ(r.config.source.at(p.name), "default") << p.name;
}

TEST(Config, ParsesEveryParameter) {
  auto r = parse_config({{"OPTIREDUCE_MODE", "reliable"},
                         {"OPTIREDUCE_TRANSPORT", "ucx"},
                         {"OPTIREDUCE_MIN_BYTES", "64K"},
                         {"OPTIREDUCE_CHUNK_BYTES", "512K"},
                         {"OPTIREDUCE_TIMEOUT_MS", "250"},
                         {"OPTIREDUCE_REPORT", "/tmp/r.json"},
                         {"OPTIREDUCE_LOG", "debug"},
                         {"OPTIREDUCE_UCX_TLS", "tcp"}});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.config.mode, Mode::reliable);
  EXPECT_EQ(r.config.min_bytes, 64u << 10);
  EXPECT_EQ(r.config.chunk_bytes, 512u << 10);
  EXPECT_EQ(r.config.timeout_ms, 250u);
  EXPECT_EQ(r.config.report_path, "/tmp/r.json");
  EXPECT_EQ(r.config.log_level, LogLevel::debug);
  EXPECT_EQ(r.config.source.at("OPTIREDUCE_MODE"), "environment");
}

void expect_error(const Environment& env, const std::string& must_contain_a, const std::string& must_contain_b) {
  auto r = parse_config(env);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find(must_contain_a), std::string::npos) << r.error;
  EXPECT_NE(r.error.find(must_contain_b), std::string::npos) << r.error;
  EXPECT_EQ(r.error.find('\n'), std::string::npos) << "one line";
}

TEST(Config, FaultStallNamesARankAndHowLongItStopsAsItGivesUp) {
  auto r = parse_config({{"OPTIREDUCE_FAULT_STALL", "2:800"}});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.config.faults.stall_rank, 2);
  EXPECT_EQ(r.config.faults.stall_ms, 800.0);
  EXPECT_TRUE(r.config.faults.any());
  EXPECT_FALSE(parse_config({}).config.faults.any());
  expect_error({{"OPTIREDUCE_FAULT_STALL", "800"}}, "OPTIREDUCE_FAULT_STALL=\"800\"", "RANK:MILLISECONDS");
  expect_error({{"OPTIREDUCE_FAULT_STALL", "1:-5"}}, "OPTIREDUCE_FAULT_STALL", "RANK:MILLISECONDS");
  expect_error({{"OPTIREDUCE_FAULT_STALL", "x:5"}}, "OPTIREDUCE_FAULT_STALL", "RANK:MILLISECONDS");
}

TEST(Config, BadValuesNameTheVariableTheValueAndWhatIsAccepted) {
  expect_error({{"OPTIREDUCE_MODE", "fast"}}, "OPTIREDUCE_MODE=\"fast\"", "bounded, reliable, off");
  expect_error({{"OPTIREDUCE_TRANSPORT", "verbs"}}, "OPTIREDUCE_TRANSPORT=\"verbs\"", "ucx");
  expect_error({{"OPTIREDUCE_MIN_BYTES", "-1"}}, "OPTIREDUCE_MIN_BYTES", "bytes");
  expect_error({{"OPTIREDUCE_MIN_BYTES", "12Q"}}, "OPTIREDUCE_MIN_BYTES=\"12Q\"", "suffix");
  expect_error({{"OPTIREDUCE_CHUNK_BYTES", "1023"}}, "OPTIREDUCE_CHUNK_BYTES", "multiple of 4");
  expect_error({{"OPTIREDUCE_CHUNK_BYTES", "1026"}}, "OPTIREDUCE_CHUNK_BYTES", "multiple of 4");
  expect_error({{"OPTIREDUCE_TIMEOUT_MS", "0"}}, "OPTIREDUCE_TIMEOUT_MS=\"0\"", "1 to 3600000");
  expect_error({{"OPTIREDUCE_TIMEOUT_MS", "10K"}}, "OPTIREDUCE_TIMEOUT_MS", "1 to 3600000");
  expect_error({{"OPTIREDUCE_REPORT", ""}}, "OPTIREDUCE_REPORT", "path");
  expect_error({{"OPTIREDUCE_LOG", "verbose"}}, "OPTIREDUCE_LOG=\"verbose\"", "error, warn, info, debug");
}

TEST(Config, UnknownVariablesAreErrorsButUcxOnesBelongToUcx) {
  expect_error({{"OPTIREDUCE_MODEE", "bounded"}}, "unknown variable OPTIREDUCE_MODEE", "OPTIREDUCE_MODE");
  EXPECT_TRUE(parse_config({{"OPTIREDUCE_UCX_TLS", "tcp"}, {"OPTIREDUCE_UCX_NET_DEVICES", "lo"}}).ok());
}

TEST(Config, AgreementTextCoversWhatChangesTheCollectiveOnly) {
  auto a = parse_config({{"OPTIREDUCE_LOG", "debug"}, {"OPTIREDUCE_REPORT", "/a"}}).config;
  auto b = parse_config({}).config;
  EXPECT_EQ(a.agreement_text(), b.agreement_text());
  auto c = parse_config({{"OPTIREDUCE_MIN_BYTES", "0"}}).config;
  EXPECT_NE(c.agreement_text(), b.agreement_text());
}

TEST(Config, ByteCounts) {
  std::uint64_t n = 0;
  EXPECT_TRUE(parse_byte_count("0", n));
  EXPECT_EQ(n, 0u);
  EXPECT_TRUE(parse_byte_count("3k", n));
  EXPECT_EQ(n, 3072u);
  EXPECT_TRUE(parse_byte_count("2G", n));
  EXPECT_EQ(n, 2ull << 30);
  EXPECT_FALSE(parse_byte_count("", n));
  EXPECT_FALSE(parse_byte_count("K", n));
  EXPECT_FALSE(parse_byte_count("1KB", n));
  EXPECT_FALSE(parse_byte_count("99999999999999999999", n));
  EXPECT_FALSE(parse_byte_count("18446744073709551615G", n));
}

std::vector<const Parameter*> every_parameter() {
  std::vector<const Parameter*> all;
  for (const auto* table : {&engine_parameters(), &fault_parameters(), &transport_parameters(), &output_parameters()})
    for (const auto& p : *table) all.push_back(&p);
  return all;
}

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> words;
  for (std::size_t at = 0; at <= text.size();) {
    const auto comma = std::min(text.find(", ", at), text.size());
    words.push_back(text.substr(at, comma - at));
    at = comma + 2;
  }
  return words;
}

// The "accepted" text is made from the parser's own values: each default, each listed word and
// each end of a listed range is accepted, and just past a range's end is not.
TEST(Config, AcceptedTextIsWhatTheParserAccepts) {
  int choices = 0, ranges = 0;
  for (const Parameter* p : every_parameter()) {
    const std::string& name = p->info.name;
    Config c;
    if (p->info.default_text.front() != '(') {
      EXPECT_TRUE(p->apply(c, p->info.default_text)) << name << " default";
    }
    const std::string& accepted = p->info.accepted;
    if (accepted.find(", ") != std::string::npos &&
        accepted.find_first_not_of("abcdefghijklmnopqrstuvwxyz, ") == std::string::npos) {
      ++choices;
      const auto words = words_of(accepted);
      EXPECT_GE(words.size(), 2u) << name;
      for (const auto& word : words) EXPECT_TRUE(p->apply(c, word)) << name << "=" << word;
      EXPECT_FALSE(p->apply(c, words.front() + "x")) << name;
      if (p->info.default_text.front() != '(') {
        EXPECT_NE(std::find(words.begin(), words.end(), p->info.default_text), words.end()) << name;
      }
    }
    const auto to = accepted.find(" to ");
    std::uint64_t lo = 0, hi = 0;
    if (to != std::string::npos && parse_byte_count(accepted.substr(0, to), lo)) {
      const auto end = accepted.find_first_of(" ,", to + 4);
      ASSERT_TRUE(parse_byte_count(accepted.substr(to + 4, end - to - 4), hi)) << name << ": " << accepted;
      ++ranges;
      EXPECT_TRUE(p->apply(c, std::to_string(lo))) << name << "=" << lo;
      EXPECT_TRUE(p->apply(c, std::to_string(hi))) << name << "=" << hi;
      EXPECT_FALSE(p->apply(c, std::to_string(hi + 1))) << name << "=" << hi + 1;
      if (lo > 0) {
        EXPECT_FALSE(p->apply(c, std::to_string(lo - 1))) << name << "=" << lo - 1;
      }
    }
  }
  EXPECT_EQ(choices, 10);  // mode, fill, agree fill, hadamard, overlap, transport, step aside, hierarchy, auth, log
  EXPECT_EQ(ranges, 6);    // min and chunk bytes, timeout, watchdog, resend rounds, calibration calls
}

}  // namespace
}  // namespace optireduce

namespace optireduce {
namespace {

TEST(Config, DatagramTransportSettings) {
  auto r = parse_config({{"OPTIREDUCE_TRANSPORT", "ofi"}, {"OPTIREDUCE_OFI_PROVIDER", "udp"},
                         {"OPTIREDUCE_OFI_IFACE", "lo"}, {"OPTIREDUCE_RATE", "2.5G"}, {"OPTIREDUCE_FEC", "8"},
                         {"OPTIREDUCE_AGREE_FILL", "off"}});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.config.transport, TransportKind::ofi);
  EXPECT_EQ(r.config.transports.ofi.provider, "udp");
  EXPECT_EQ(r.config.transports.ofi.iface, "lo");
  EXPECT_DOUBLE_EQ(r.config.transports.ofi.rate_bits_per_s, 2.5e9);
  EXPECT_EQ(r.config.transports.ofi.fec_group, 8u);
  EXPECT_FALSE(r.config.agree_fill);
  // The provider and FEC shape the wire: part of what every rank must agree on; the interface may
  // differ per host.
  const std::string text = r.config.agreement_text();
  EXPECT_NE(text.find("ofi_provider=udp"), std::string::npos);
  EXPECT_NE(text.find("fec=8"), std::string::npos);
  EXPECT_EQ(text.find("iface"), std::string::npos);

  double rate = 0;
  EXPECT_TRUE(parse_bit_rate("800M", rate));
  EXPECT_DOUBLE_EQ(rate, 8e8);
  EXPECT_TRUE(parse_bit_rate("500k", rate));
  EXPECT_DOUBLE_EQ(rate, 5e5);
  for (const char* bad : {"", "0", "10X", "G", "1e9", "-5M", "20000G", "1.5.2G"}) EXPECT_FALSE(parse_bit_rate(bad, rate)) << bad;
  for (auto [name, value] : std::vector<std::pair<const char*, const char*>>{
           {"OPTIREDUCE_TRANSPORT", "tcp"}, {"OPTIREDUCE_FEC", "1"}, {"OPTIREDUCE_UDP_PORTS", "80-90"},
           {"OPTIREDUCE_UDP_PORTS", "5000"}, {"OPTIREDUCE_AUTH", "maybe"}, {"OPTIREDUCE_FEC", "17"},
           {"OPTIREDUCE_RATE", "fast"}, {"OPTIREDUCE_OFI_IFACE", "a very long interface name"},
           {"OPTIREDUCE_AGREE_FILL", "maybe"}}) {
    auto bad = parse_config({{name, value}});
    EXPECT_FALSE(bad.ok()) << name << "=" << value;
    EXPECT_NE(bad.error.find(name), std::string::npos) << bad.error;
  }
}

}  // namespace
}  // namespace optireduce
