// The elastic driver's pieces: the discovery script's output, and the memberships published in
// the store (ranks stable for survivors, new workers after them, local and cross ranks by host).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "discovery.h"
#include "elastic_members.h"
#include "store.h"

namespace {

std::string Script(const std::string& body) {
  char dir[] = "/tmp/hvds_discoveryXXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/discover.sh";
  std::ofstream(path) << "#!/bin/sh\n" << body;
  return path;
}

std::string Get(hvds_store_server_t* srv, const std::string& key) {
  char buf[256];
  return hvds__store_server_get(srv, key.c_str(), buf, sizeof buf) ? buf : "(absent)";
}

TEST(Discovery, ReadsHostsWithAndWithoutSlots) {
  std::string s = Script("echo localhost:2\necho\necho 127.0.0.1\necho localhost:3\n");
  hvds_host_t* hosts = nullptr;
  int n = 0;
  char err[512] = "";
  ASSERT_EQ(hvds__discover_hosts(("sh " + s).c_str(), 4, &hosts, &n, err, sizeof err),
            HVDS_SUCCESS)
      << err;
  ASSERT_EQ(n, 2);
  EXPECT_STREQ(hosts[0].name, "localhost");
  EXPECT_EQ(hosts[0].slots, 3);  // listed twice: the last count
  EXPECT_STREQ(hosts[1].name, "127.0.0.1");
  EXPECT_EQ(hosts[1].slots, 4);  // --slots-per-host
  free(hosts);
}

TEST(Discovery, AFailingScriptOrABadLineIsAnError) {
  hvds_host_t* hosts = nullptr;
  int n = 0;
  char err[512] = "";
  EXPECT_EQ(hvds__discover_hosts(("sh " + Script("exit 3\n")).c_str(), 0, &hosts, &n, err,
                                 sizeof err),
            HVDS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err).find("failed (status 3)"), std::string::npos) << err;
  EXPECT_EQ(hvds__discover_hosts(("sh " + Script("echo host:x\n")).c_str(), 0, &hosts, &n, err,
                                 sizeof err),
            HVDS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err).find("not host[:slots]"), std::string::npos) << err;
  EXPECT_EQ(hosts, nullptr);
}

TEST(Discovery, AScriptThatHangsIsKilledAtTheTimeout) {
  hvds_host_t* hosts = nullptr;
  int n = 0;
  char err[512] = "";
  // The sleep keeps stdout open in a child of the script: the whole group is killed.
  EXPECT_EQ(hvds__discover_hosts(("sh " + Script("echo a:1\nsleep 60\n")).c_str(), 0, &hosts,
                                 &n, err, sizeof err),
            HVDS_TIMEOUT);
  EXPECT_NE(std::string(err).find("did not finish within 10 s"), std::string::npos) << err;
  EXPECT_EQ(hosts, nullptr);
}

TEST(Members, SurvivorsKeepTheirOrderAndNewWorkersComeAfter) {
  hvds_store_server_t* srv = nullptr;
  int port = 0;
  ASSERT_EQ(hvds__store_server_start("127.0.0.1", 0, "secret", &srv, &port), HVDS_SUCCESS);
  hvds_member_t slots[8];
  hvds_members_t ms = {slots, 0, 8, 0};
  hvds__members_add(&ms, "a", 0);
  hvds__members_add(&ms, "a", 1);
  hvds__members_add(&ms, "b", 0);
  ASSERT_EQ(hvds__members_publish(&ms, srv, "j", "start"), HVDS_SUCCESS);
  EXPECT_EQ(Get(srv, "hvds/j/elastic/epoch"), "1");
  EXPECT_EQ(Get(srv, "hvds/j/elastic/e1/a:1"), "1,3,1,2,0,1");
  EXPECT_EQ(Get(srv, "hvds/j/elastic/e1/b:0"), "2,3,0,1,1,2");
  // a:0 (rank 0) fails, b:1 joins: a:1 becomes rank 0, b:0 rank 1, the new worker rank 2.
  slots[0].w.exited = 1;
  hvds__members_add(&ms, "b", 1);
  ASSERT_EQ(hvds__members_publish(&ms, srv, "j", "a:0 failed"), HVDS_SUCCESS);
  EXPECT_EQ(Get(srv, "hvds/j/elastic/epoch"), "2");
  EXPECT_EQ(Get(srv, "hvds/j/elastic/e2/a:1"), "0,3,0,1,0,2");
  EXPECT_EQ(Get(srv, "hvds/j/elastic/e2/b:0"), "1,3,0,2,1,2");
  EXPECT_EQ(Get(srv, "hvds/j/elastic/e2/b:1"), "2,3,1,2,0,1");
  EXPECT_EQ(Get(srv, "hvds/j/elastic/e2/a:0"), "(absent)");
  EXPECT_EQ(slots[0].rank, -1);
  // A removed worker is left out, and still counts as running until it exits.
  slots[2].removed = 1;
  EXPECT_EQ(hvds__members_live(&ms), 2);
  EXPECT_EQ(hvds__members_running(&ms), 3);
  ASSERT_EQ(hvds__members_publish(&ms, srv, "j", "b:0 dropped"), HVDS_SUCCESS);
  EXPECT_EQ(Get(srv, "hvds/j/elastic/e3/b:1"), "1,2,0,1,1,2");
  EXPECT_EQ(Get(srv, "hvds/j/elastic/e3/b:0"), "(absent)");
  hvds__store_server_stop(srv);
}

}  // namespace
