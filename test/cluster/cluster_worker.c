/* A worker for the cluster tests, run under `hvdsparse run ... cluster_worker SCENARIO`:
 *   identity  prints this rank's view of itself and the address it has on the cluster network;
 *   cut       allreduces every 20 ms; after the first success rank 0 prints "READY" (the test then
 *             cuts a host's link) and every rank runs on until an allreduce fails, then prints
 *             the error and exits 3. Exits 1 if nothing fails within a minute. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hvdsparse.h"

static void fail(const char* what, hvds_result_t rc, const char* why) {
  fprintf(stderr, "rank %d FAIL %s: %s: %s\n", hvds_rank(), what, hvds_result_str(rc), why);
  exit(1);
}

/* The IPv4 address of interface name in this process's network namespace, or "none". */
static void iface_addr(const char* name, char* out, size_t len) {
  snprintf(out, len, "none");
  struct ifaddrs* all = NULL;
  if (name == NULL || getifaddrs(&all) != 0) return;
  for (struct ifaddrs* a = all; a != NULL; a = a->ifa_next) {
    if (a->ifa_addr == NULL || a->ifa_addr->sa_family != AF_INET) continue;
    if (strcmp(a->ifa_name, name) != 0) continue;
    inet_ntop(AF_INET, &((struct sockaddr_in*)a->ifa_addr)->sin_addr, out, (socklen_t)len);
    break;
  }
  freeifaddrs(all);
}

static void scenario_identity(void) {
  char addr[64];
  iface_addr(getenv("HVDSPARSE_GLOO_IFACE"), addr, sizeof(addr));
  const char* host = getenv("HVDSPARSE_HOSTNAME");
  printf("IDENTITY rank=%d size=%d local_rank=%d local_size=%d cross_rank=%d cross_size=%d "
         "host=%s addr=%s\n",
         hvds_rank(), hvds_size(), hvds_local_rank(), hvds_local_size(), hvds_cross_rank(),
         hvds_cross_size(), host ? host : "?", addr);
}

/* One 1 KiB allreduce; returns its status and, on failure, leaves the error in err. */
static hvds_result_t allreduce_once(char* err, size_t errlen) {
  static float data[256];
  hvds_tensor_t t = {data, HVDS_FLOAT32, -1, 1, {256}};
  hvds_op_options_t opt = HVDS_OP_OPTIONS_INIT;
  opt.name = "heartbeat";
  hvds_handle_t h;
  hvds_result_t rc = hvds_allreduce_async(&t, &t, &opt, &h);
  if (rc != HVDS_SUCCESS) {
    snprintf(err, errlen, "%s", hvds_last_error());
    return rc;
  }
  rc = hvds_wait(h, 120000);
  if (rc != HVDS_SUCCESS) snprintf(err, errlen, "%s", hvds_handle_error(h));
  hvds_release(h);
  return rc;
}

static void scenario_cut(void) {
  char err[2048];
  hvds_result_t rc = allreduce_once(err, sizeof(err));
  if (rc != HVDS_SUCCESS) fail("first allreduce", rc, err);
  if (hvds_rank() == 0) printf("READY\n");
  fflush(stdout);
  time_t start = time(NULL);
  while (time(NULL) - start < 60) {
    usleep(20000);
    rc = allreduce_once(err, sizeof(err));
    if (rc != HVDS_SUCCESS) {
      printf("rank %d error: %s\n", hvds_rank(), err);
      fflush(stdout);
      exit(3);
    }
  }
  fail("cut", HVDS_SUCCESS, "no allreduce failed within 60 s of READY");
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: cluster_worker identity|cut\n");
    return 2;
  }
  hvds_result_t rc = hvds_init();
  if (rc != HVDS_SUCCESS) fail("init", rc, hvds_last_error());
  if (strcmp(argv[1], "identity") == 0) {
    scenario_identity();
  } else if (strcmp(argv[1], "cut") == 0) {
    scenario_cut();
  } else {
    fprintf(stderr, "unknown scenario %s\n", argv[1]);
    return 2;
  }
  rc = hvds_shutdown();
  if (rc != HVDS_SUCCESS) fail("shutdown", rc, hvds_last_error());
  return 0;
}
