// horovodrun compatibility of the launcher's command line: flags without effect (warned),
// elastic flags, --network-interface, --check-build, --config-file and its YAML
// reader, and which of the launcher's variables travel to remote workers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "args.h"
#include "remote_env.h"
#include "run_args.h"
#include "yaml_map.h"

namespace {

using hvds_test::Args;

std::string Knob(const hvds_run_args_t& a, const char* suffix) {
  const char* v = hvds__env_list_get(&a.knobs, suffix);
  return v ? v : "<unset>";
}

std::string Warnings(const hvds_run_args_t& a) {
  char* text = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  hvds__run_args_print_warnings(&a, f);
  fclose(f);
  std::string out(text, len);
  free(text);
  return out;
}

// A file holding text, removed when the object goes.
struct TempFile {
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/hvds_config_XXXXXX";
    int fd = mkstemp(name);
    path = name;
    std::ofstream(path) << text;
    close(fd);
  }
  ~TempFile() { unlink(path.c_str()); }
  std::string path;
};

TEST(HorovodrunFlags, FlagsWithoutEffectAreAcceptedWithAWarningEach) {
  Args w({"-np", "2", "--mpi", "--gloo", "--jsrun", "--tcp", "--num-nccl-streams", "2",
          "--thread-affinity=1", "--mpi-threads-disable", "--mpi-args=--map-by ppr:6:node",
          "--binding-args", "--rankfile f", "--hierarchical-allgather", "--disable-cache",
          "--torus-allreduce", "python", "train.py"});
  hvds_run_args_t a;
  ASSERT_EQ(w.Parse(&a), HVDS_SUCCESS) << w.err;
  ASSERT_EQ(a.ncommand, 2);  // every value was taken by its flag
  EXPECT_STREQ(a.command[0], "python");
  std::string warned = Warnings(a);
  for (const char* flag :
       {"--mpi", "--gloo", "--jsrun", "--tcp", "--num-nccl-streams", "--thread-affinity",
        "--mpi-threads-disable", "--mpi-args", "--binding-args", "--hierarchical-allgather",
        "--disable-cache", "--torus-allreduce"})
    EXPECT_NE(warned.find(std::string("hvdsparse: warning: ") + flag + " has no effect: "),
              std::string::npos)
        << flag << "\n" << warned;
  EXPECT_EQ(a.knobs.n, 0) << "a flag without effect set a knob";
  hvds__run_args_free(&a);
}

TEST(HorovodrunFlags, HorovodrunSpellingsOfKnobsWork) {
  Args w({"-np", "1", "--no-autotune", "--stall-check", "--log-with-timestamp",
          "--no-timeline-mark-cycles", "-prefix-timestamp", "true"});
  hvds_run_args_t a;
  ASSERT_EQ(w.Parse(&a), HVDS_SUCCESS) << w.err;
  EXPECT_EQ(Knob(a, "AUTOTUNE"), "0");
  EXPECT_EQ(Knob(a, "STALL_CHECK_DISABLE"), "0");
  EXPECT_EQ(Knob(a, "LOG_HIDE_TIME"), "0");
  EXPECT_EQ(Knob(a, "TIMELINE_MARK_CYCLES"), "0");
  EXPECT_EQ(a.prefix_timestamp, 1);
  hvds__run_args_free(&a);
}

TEST(HorovodrunFlags, ElasticFlagsMakeAnElasticJob) {
  Args w({"-np", "3", "--min-np", "2", "--max-np=4", "--host-discovery-script", "./discover.sh",
          "--slots-per-host", "2", "--elastic-timeout", "60", "--reset-limit", "3", "true"});
  hvds_run_args_t a;
  ASSERT_EQ(w.Parse(&a), HVDS_SUCCESS) << w.err;
  EXPECT_EQ(a.elastic, 1);
  EXPECT_EQ(a.np, 3);
  EXPECT_EQ(a.min_np, 2);
  EXPECT_EQ(a.max_np, 4);
  EXPECT_STREQ(a.discovery_script, "./discover.sh");
  EXPECT_EQ(a.slots_per_host, 2);
  EXPECT_EQ(a.elastic_timeout, 60);
  EXPECT_EQ(a.reset_limit, 3);
  hvds__run_args_free(&a);
  // The discovery script alone makes a job elastic; -np then defaults to --min-np.
  Args d({"--host-discovery-script", "./discover.sh", "--min-np", "2", "true"});
  ASSERT_EQ(d.Parse(&a), HVDS_SUCCESS) << d.err;
  EXPECT_EQ(a.elastic, 1);
  hvds__run_args_free(&a);
}

TEST(HorovodrunFlags, ElasticFlagsNeedAnElasticJob) {
  for (std::vector<std::string> words :
       {std::vector<std::string>{"-np", "2", "--max-np=4", "true"},
        {"-np", "2", "--slots-per-host", "2", "true"},
        {"-np", "2", "--elastic-timeout", "60", "true"},
        {"-np", "2", "--reset-limit", "3", "true"}}) {
    Args w(words);
    hvds_run_args_t a;
    EXPECT_EQ(w.Parse(&a), HVDS_INVALID_ARGUMENT) << words[2];
    EXPECT_NE(std::string(w.err).find("need an elastic job"), std::string::npos) << w.err;
  }
  Args w({"-np", "4", "--min-np", "3", "--max-np", "2", "true"});
  hvds_run_args_t a;
  EXPECT_EQ(w.Parse(&a), HVDS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(w.err).find("below --min-np"), std::string::npos) << w.err;
}

TEST(HorovodrunFlags, BlacklistCooldownRangeIsParsedAndChecked) {
  Args w({"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "10", "100", "true"});
  hvds_run_args_t a;
  ASSERT_EQ(w.Parse(&a), HVDS_SUCCESS) << w.err;
  EXPECT_EQ(a.cooldown_min, 10);
  EXPECT_EQ(a.cooldown_max, 100);
  EXPECT_EQ(hvds__env_list_get(&a.warnings, "--blacklist-cooldown-range"), nullptr);
  hvds__run_args_free(&a);
  for (std::vector<std::string> words :
       {std::vector<std::string>{"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "0",
                                 "10", "true"},
        {"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "20", "10", "true"},
        {"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "1", "4000", "true"},
        {"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "5"}}) {
    Args bad(words);
    EXPECT_EQ(bad.Parse(&a), HVDS_INVALID_ARGUMENT) << words[5];
  }
  Args fixed({"-np", "2", "--blacklist-cooldown-range", "1", "2", "true"});
  EXPECT_EQ(fixed.Parse(&a), HVDS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fixed.err).find("need an elastic job"), std::string::npos) << fixed.err;
}

TEST(HorovodrunFlags, BlacklistScopeIsHostUnlessSlotIsAsked) {
  hvds_run_args_t a;
  Args host({"-np", "2", "--min-np", "1", "true"});
  ASSERT_EQ(host.Parse(&a), HVDS_SUCCESS) << host.err;
  EXPECT_EQ(a.blacklist_slots, 0);  // Horovod's: the failed worker's whole host
  hvds__run_args_free(&a);
  Args slot({"-np", "2", "--min-np", "1", "--blacklist-scope", "slot", "true"});
  ASSERT_EQ(slot.Parse(&a), HVDS_SUCCESS) << slot.err;
  EXPECT_EQ(a.blacklist_slots, 1);
  hvds__run_args_free(&a);
  Args bad({"-np", "2", "--min-np", "1", "--blacklist-scope", "rack", "true"});
  EXPECT_EQ(bad.Parse(&a), HVDS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(bad.err).find("invalid --blacklist-scope 'rack': host or slot"),
            std::string::npos)
      << bad.err;
  Args fixed({"-np", "2", "--blacklist-scope", "slot", "true"});
  EXPECT_EQ(fixed.Parse(&a), HVDS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fixed.err).find("need an elastic job"), std::string::npos) << fixed.err;
}

TEST(HorovodrunFlags, NetworkInterfacesAccumulateWithoutRepeats) {
  Args w({"-np", "1", "--network-interface", "eth0", "--network-interface", "eth1",
          "--network-interfaces", "eth1,ib0", "--network-interface=eth0", "true"});
  hvds_run_args_t a;
  ASSERT_EQ(w.Parse(&a), HVDS_SUCCESS) << w.err;
  EXPECT_STREQ(a.network_interfaces, "eth0,eth1,ib0");
  EXPECT_EQ(Knob(a, "GLOO_IFACE"), "eth0");  // the first carries the data plane
  hvds__run_args_free(&a);
}

TEST(HorovodrunFlags, CheckBuildNeedsNeitherNpNorACommand) {
  for (const char* flag : {"-cb", "--check-build"}) {
    Args w({flag});
    hvds_run_args_t a;
    ASSERT_EQ(w.Parse(&a), HVDS_SUCCESS) << w.err;
    EXPECT_EQ(a.check_build, 1);
    hvds__run_args_free(&a);
  }
}

// ---------------------------------------------------------------- --config-file

const char* kConfig = R"(# horovodrun's config file
---
controller: gloo
params:
  fusion_threshold_mb: 32
  cycle_time_ms: 2.5   # ms
  cache_capacity: 512
  hierarchical_allreduce: true
  hierarchical_allgather: false
autotune:
  enabled: yes
  log_file: "/tmp/auto tune.csv"
  warmup_samples: 2
timeline:
  filename: '/tmp/it''s.json'
  mark_cycles: ~
stall_check:
  enabled: false
  warning_time_seconds: 11
library_options:
  num_nccl_streams: 2
  gloo_timeout_seconds: 44
  ccl_bgt_affinity: 1
logging:
  level: DEBUG
  with_timestamp: false
extras:
  something: 1
)";

TEST(ConfigFile, SettingsBecomeKnobsAndTheCommandLineWins) {
  TempFile f(kConfig);
  Args w({"-np", "2", "--fusion-threshold-mb", "8", "--config-file", f.path, "--no-autotune",
          "true"});
  hvds_run_args_t a;
  ASSERT_EQ(w.Parse(&a), HVDS_SUCCESS) << w.err;
  EXPECT_EQ(Knob(a, "FUSION_THRESHOLD"), "8388608");  // the command line's 8, not the file's 32
  EXPECT_EQ(Knob(a, "AUTOTUNE"), "0");                // --no-autotune, after the file
  EXPECT_EQ(Knob(a, "CYCLE_TIME"), "2.5");
  EXPECT_EQ(Knob(a, "CACHE_CAPACITY"), "512");
  EXPECT_EQ(Knob(a, "HIERARCHICAL_ALLREDUCE"), "1");
  EXPECT_EQ(Knob(a, "AUTOTUNE_LOG"), "/tmp/auto tune.csv");
  EXPECT_EQ(Knob(a, "AUTOTUNE_WARMUP_SAMPLES"), "2");
  EXPECT_EQ(Knob(a, "TIMELINE"), "/tmp/it's.json");
  EXPECT_EQ(Knob(a, "TIMELINE_MARK_CYCLES"), "<unset>");  // YAML's null: not set
  EXPECT_EQ(Knob(a, "STALL_CHECK_DISABLE"), "1");
  EXPECT_EQ(Knob(a, "STALL_CHECK_TIME_SECONDS"), "11");
  EXPECT_EQ(Knob(a, "GLOO_TIMEOUT_SECONDS"), "44");
  EXPECT_EQ(Knob(a, "LOG_LEVEL"), "DEBUG");
  EXPECT_EQ(Knob(a, "LOG_HIDE_TIME"), "1");
  std::string warned = Warnings(a);
  for (const char* key : {"controller", "params.hierarchical_allgather",
                          "library_options.num_nccl_streams", "library_options.ccl_bgt_affinity",
                          "extras.something"})
    EXPECT_NE(warned.find(std::string("config file key ") + key + " has no effect"),
              std::string::npos)
        << key << "\n" << warned;
  hvds__run_args_free(&a);
}

TEST(ConfigFile, ErrorsNameTheLineAndTheKey) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"params:\n  fusion_threshold_mb: lots\n", "line 2: params.fusion_threshold_mb: invalid"},
      {"params:\n  hierarchical_allreduce: maybe\n", "line 2: params.hierarchical_allreduce: "
                                                     "expected true or false"},
      {"controller: nccl\n", "line 1: controller: no such controller 'nccl'"},
      {"params:\n  - 1\n", "line 2: lists are not supported"},
      {"params:\n\tcycle_time_ms: 1\n", "line 2: tabs are not allowed"},
      {"params: {cycle_time_ms: 1}\n", "line 1: '{' starts a YAML form"},
      {"params:\n  cycle_time_ms: 1\n    deeper: 2\n", "line 3: indentation 4 differs"},
      {"  cycle_time_ms: 1\n", "line 1: unexpected indentation"},
      {"logging:\n  level: \"DEBUG\n", "line 2: unterminated double-quoted value"},
      {"just text\n", "line 1: expected 'key: value'"},
  };
  for (const Case& c : cases) {
    TempFile f(c.text);
    Args w({"-np", "1", "--config-file", f.path, "true"});
    hvds_run_args_t a;
    EXPECT_EQ(w.Parse(&a), HVDS_INVALID_ARGUMENT) << c.text;
    EXPECT_NE(std::string(w.err).find(c.says), std::string::npos) << c.text << "\n" << w.err;
    EXPECT_NE(std::string(w.err).find(f.path), std::string::npos) << w.err;
  }
  Args missing({"-np", "1", "--config-file", "/nonexistent/config.yaml", "true"});
  hvds_run_args_t a;
  EXPECT_NE(missing.Parse(&a), HVDS_SUCCESS);
  EXPECT_NE(std::string(missing.err).find("cannot read /nonexistent/config.yaml"),
            std::string::npos)
      << missing.err;
}

TEST(YamlMap, EntriesInFileOrderWithSectionsAndNulls) {
  TempFile f("a: 1\ns:\n  # comment\n  k: 'x # y'  # trailing\n  n:\n  q: \"a\\\"b\"\nb: two words\n");
  hvds_yaml_entry_t* e = nullptr;
  int n = 0;
  char err[256] = "";
  ASSERT_EQ(hvds__yaml_map_read(f.path.c_str(), &e, &n, err, sizeof(err)), HVDS_SUCCESS) << err;
  ASSERT_EQ(n, 5);
  EXPECT_STREQ(e[0].section, "");
  EXPECT_STREQ(e[0].key, "a");
  EXPECT_STREQ(e[0].value, "1");
  EXPECT_STREQ(e[1].section, "s");
  EXPECT_STREQ(e[1].value, "x # y");
  EXPECT_EQ(e[1].line, 4);
  EXPECT_EQ(e[2].is_null, 1);
  EXPECT_STREQ(e[3].value, "a\"b");
  EXPECT_STREQ(e[4].section, "");
  EXPECT_STREQ(e[4].value, "two words");
  free(e);
}

// ---------------------------------------------------------------- remote environment

TEST(RemoteEnv, EverythingButTheLaunchersOwnSessionTravels) {
  for (const char* yes : {"PATH=/usr/bin", "LD_LIBRARY_PATH=/opt/lib", "MY_SETTING=1",
                          "PYTHONPATH=/x", "HVDSPARSE_FUSION_THRESHOLD=1", "NCCL_DEBUG=INFO",
                          "OMP_NUM_THREADS=4", "HOME=/root", "_X=1", "EMPTY="})
    EXPECT_TRUE(hvds__remote_env_forwards(yes)) << yes;
  for (const char* no : {"OLDPWD=/a", "PWD=/b", "SHLVL=2", "_=/usr/bin/env", "HOSTNAME=me",
                         "SSH_AUTH_SOCK=/tmp/agent", "SSH_CONNECTION=1 2 3 4",
                         "CUDA_VISIBLE_DEVICES=0,1", "NVIDIA_CUDA_VISIBLE_DEVICES=0",
                         "BASH_FUNC_module%%=() { :; }", "1BAD=x", "BAD-NAME=x", "NOEQUALS"})
    EXPECT_FALSE(hvds__remote_env_forwards(no)) << no;
}

}  // namespace
