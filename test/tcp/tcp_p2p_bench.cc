// Two-process benchmark of the TCP transport against the Gloo shim on this host (loopback).
//
//   tcp_p2p_bench tcp|gloo [bytes ...]     default sizes: 1 KiB, 1 MiB, 4 MiB, 16 MiB, 64 MiB
//
// Rank 0 and rank 1 (a forked child) rendezvous through files in a temporary directory, then for
// each size measure
//   pingpong:  S bytes there and back; reported as half the round trip and one-way GB/s;
//   allreduce: hvds__allreduce of S bytes of float32 (AUTO algorithm), time per call.
// Each figure is the median of the timed repetitions after 3 warm-ups.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collectives.h"
#include "gloo_p2p.h"
#include "tcp_p2p.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string KeyPath(const char* dir, const char* key) {
  std::string name = key;
  std::replace(name.begin(), name.end(), '/', '_');
  return std::string(dir) + "/" + name;
}

hvds_result_t FileSet(void* ctx, const char* key, const void* val, size_t len) {
  std::string path = KeyPath(static_cast<const char*>(ctx), key), tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "wb");
  if (f == nullptr) return HVDS_SYSTEM_ERROR;
  fwrite(val, 1, len, f);
  fclose(f);
  return rename(tmp.c_str(), path.c_str()) == 0 ? HVDS_SUCCESS : HVDS_SYSTEM_ERROR;
}

hvds_result_t FileGet(void* ctx, const char* key, int timeout_ms, void** val, size_t* len) {
  std::string path = KeyPath(static_cast<const char*>(ctx), key);
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (FILE* f = fopen(path.c_str(), "rb")) {
      std::vector<char> buf(4096);
      size_t n = fread(buf.data(), 1, buf.size(), f);
      fclose(f);
      *val = malloc(n + 1);
      memcpy(*val, buf.data(), n);
      *len = n;
      return HVDS_SUCCESS;
    }
    if (Clock::now() > deadline) return HVDS_TIMEOUT;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void Check(hvds_p2p_t* p, hvds_result_t rc) {
  if (rc == HVDS_SUCCESS) return;
  fprintf(stderr, "rank %d: %s\n", p->rank, p->error);
  exit(1);
}

void Xfer(hvds_p2p_t* p, bool send, void* buf, size_t n, uint64_t tag) {
  hvds_p2p_req_t* r;
  int peer = 1 - p->rank;
  Check(p, send ? p->ops->isend(p, peer, buf, n, tag, &r) : p->ops->irecv(p, peer, buf, n, tag, &r));
  Check(p, p->ops->wait(p, r, -1));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

std::vector<double> PingPong(hvds_p2p_t* p, std::vector<char>& buf, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; i++) {
    auto t0 = Clock::now();
    Xfer(p, p->rank == 0, buf.data(), buf.size(), 1);
    Xfer(p, p->rank == 1, buf.data(), buf.size(), 2);
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return t;
}

std::vector<double> Allreduce(hvds_p2p_t* p, std::vector<float>& v, int reps, uint64_t* tag) {
  std::vector<double> t;
  for (int i = 0; i < reps; i++) {
    hvds_coll_opts_t o = {(*tag)++, HVDS_ALGO_AUTO, 0, 0};
    auto t0 = Clock::now();
    Check(p, hvds__allreduce(p, v.data(), v.size(), HVDS_FLOAT32, HVDS_SUM, &o));
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return t;
}

int RunRank(bool tcp, int rank, const char* dir, const std::vector<size_t>& sizes) {
  hvds_kv_t kv = {const_cast<char*>(dir), FileSet, FileGet};
  hvds_p2p_t* p = nullptr;
  char err[512];
  hvds_result_t rc = tcp ? hvds__tcp_p2p_create(&kv, "bench", rank, 2, nullptr, nullptr, 60000,
                                                &p, err, sizeof err)
                         : hvds__gloo_p2p_create(&kv, "bench", rank, 2, nullptr, nullptr, 60000,
                                                 &p, err, sizeof err);
  if (rc != HVDS_SUCCESS) {
    fprintf(stderr, "rank %d: %s\n", rank, err);
    return 1;
  }
  uint64_t tag = 100;
  for (size_t bytes : sizes) {
    std::vector<char> buf(bytes, 1);
    std::vector<float> v(bytes / 4, 1.0f);
    int reps = bytes <= (1 << 20) ? 200 : (bytes <= (16 << 20) ? 30 : 9);
    PingPong(p, buf, 3);
    std::vector<double> pp = PingPong(p, buf, reps);
    Allreduce(p, v, 3, &tag);
    std::vector<double> ar = Allreduce(p, v, reps, &tag);
    if (rank == 0) {
      double rtt = Median(pp);
      printf("%s %10zu B  pingpong half-rtt %9.1f us (%6.2f GB/s)  allreduce median %9.1f us "
             "p90 %9.1f us max %9.1f us\n",
             tcp ? "tcp " : "gloo", bytes, rtt / 2 * 1e6, bytes / (rtt / 2) / 1e9,
             Median(ar) * 1e6, Percentile(ar, 0.9) * 1e6, Percentile(ar, 1.0) * 1e6);
      fflush(stdout);
    }
  }
  p->ops->destroy(p);  // frees p
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (strcmp(argv[1], "tcp") != 0 && strcmp(argv[1], "gloo") != 0)) {
    fprintf(stderr, "usage: %s tcp|gloo [bytes ...]\n", argv[0]);
    return 2;
  }
  bool tcp = strcmp(argv[1], "tcp") == 0;
  std::vector<size_t> sizes;
  for (int i = 2; i < argc; i++) sizes.push_back(strtoull(argv[i], nullptr, 0));
  if (sizes.empty()) sizes = {1 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  char dir[] = "/tmp/tcp_p2p_bench.XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  pid_t child = fork();
  if (child == 0) _exit(RunRank(tcp, 1, dir, sizes));
  int rc = RunRank(tcp, 0, dir, sizes);
  int status = 0;
  waitpid(child, &status, 0);
  std::string cleanup = std::string("rm -rf ") + dir;
  if (system(cleanup.c_str()) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}
