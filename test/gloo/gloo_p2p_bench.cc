// Bandwidth of the Gloo transport shim between two processes on this host (loopback).
//
//   gloo_p2p_bench [bytes ...]        default: 1 KiB, 1 MiB, 64 MiB
//
// For each size, rank 0 and rank 1 (a forked child) rendezvous through files in a temporary
// directory, then measure
//   pingpong: S bytes there and S bytes back; one-way bandwidth = S / (round trip / 2);
//   stream:   8 messages of S bytes in flight from rank 0 to rank 1, then a 1-byte ack.
// Each figure is the median of the timed repetitions after 2 warm-ups.
#include <sys/stat.h>
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

#include "gloo_p2p.h"

namespace {

using Clock = std::chrono::steady_clock;

// A key-value store over files: set writes key.tmp and renames it; get polls.
hvds_result_t FileSet(void* ctx, const char* key, const void* val, size_t len) {
  std::string dir = static_cast<const char*>(ctx);
  std::string name = key;
  std::replace(name.begin(), name.end(), '/', '_');
  std::string tmp = dir + "/" + name + ".tmp", path = dir + "/" + name;
  FILE* f = fopen(tmp.c_str(), "wb");
  if (f == nullptr) return HVDS_SYSTEM_ERROR;
  fwrite(val, 1, len, f);
  fclose(f);
  return rename(tmp.c_str(), path.c_str()) == 0 ? HVDS_SUCCESS : HVDS_SYSTEM_ERROR;
}

hvds_result_t FileGet(void* ctx, const char* key, int timeout_ms, void** val, size_t* len) {
  std::string dir = static_cast<const char*>(ctx);
  std::string name = key;
  std::replace(name.begin(), name.end(), '/', '_');
  std::string path = dir + "/" + name;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    FILE* f = fopen(path.c_str(), "rb");
    if (f != nullptr) {
      std::vector<char> buf;
      char chunk[4096];
      size_t n;
      while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) buf.insert(buf.end(), chunk, chunk + n);
      fclose(f);
      *val = malloc(buf.size() + 1);
      memcpy(*val, buf.data(), buf.size());
      *len = buf.size();
      return HVDS_SUCCESS;
    }
    if (Clock::now() > deadline) return HVDS_TIMEOUT;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void Check(hvds_p2p_t* p, hvds_result_t rc) {
  if (rc != HVDS_SUCCESS) {
    fprintf(stderr, "rank %d: %s\n", p->rank, p->error);
    exit(1);
  }
}

void Xfer(hvds_p2p_t* p, bool send, int peer, void* buf, size_t n, uint64_t tag) {
  hvds_p2p_req_t* r;
  Check(p, send ? p->ops->isend(p, peer, buf, n, tag, &r) : p->ops->irecv(p, peer, buf, n, tag, &r));
  Check(p, p->ops->wait(p, r, -1));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per repetition, measured on rank 0.
std::vector<double> PingPong(hvds_p2p_t* p, std::vector<char>& buf, int reps) {
  std::vector<double> t;
  int peer = 1 - p->rank;
  for (int i = 0; i < reps; i++) {
    auto t0 = Clock::now();
    if (p->rank == 0) {
      Xfer(p, true, peer, buf.data(), buf.size(), 1);
      Xfer(p, false, peer, buf.data(), buf.size(), 2);
    } else {
      Xfer(p, false, peer, buf.data(), buf.size(), 1);
      Xfer(p, true, peer, buf.data(), buf.size(), 2);
    }
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return t;
}

std::vector<double> Stream(hvds_p2p_t* p, std::vector<char>& buf, int window, int reps) {
  std::vector<double> t;
  int peer = 1 - p->rank;
  std::vector<hvds_p2p_req_t*> reqs(window);
  char ack = 0;
  size_t each = buf.size() / window;
  for (int i = 0; i < reps; i++) {
    auto t0 = Clock::now();
    for (int w = 0; w < window; w++) {
      char* at = buf.data() + w * each;
      Check(p, p->rank == 0 ? p->ops->isend(p, peer, at, each, 3, &reqs[w])
                            : p->ops->irecv(p, peer, at, each, 3, &reqs[w]));
    }
    for (auto* r : reqs) Check(p, p->ops->wait(p, r, -1));
    Xfer(p, p->rank == 1, peer, &ack, 1, 4);
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return t;
}

int RunRank(int rank, const char* dir, const std::vector<size_t>& sizes) {
  hvds_kv_t kv = {const_cast<char*>(dir), FileSet, FileGet};
  hvds_p2p_t* p = nullptr;
  char err[512];
  if (hvds__gloo_p2p_create(&kv, "bench", rank, 2, nullptr, nullptr, 60000, &p, err,
                            sizeof(err)) != HVDS_SUCCESS) {
    fprintf(stderr, "rank %d: %s\n", rank, err);
    return 1;
  }
  for (size_t bytes : sizes) {
    const int window = 8;
    std::vector<char> buf(bytes * window, 1);
    std::vector<char> one(bytes, 1);
    int reps = bytes <= (1 << 20) ? 200 : 9;
    PingPong(p, one, 2);
    std::vector<double> pp = PingPong(p, one, reps);
    Stream(p, buf, window, 2);
    std::vector<double> st = Stream(p, buf, window, std::max(5, reps / 10));
    if (rank == 0) {
      double rtt = Median(pp);
      printf("%10zu B  pingpong: half-rtt %9.1f us  one-way %6.2f GB/s   stream x%d: %6.2f GB/s\n",
             bytes, rtt / 2 * 1e6, bytes / (rtt / 2) / 1e9, window,
             bytes * window / Median(st) / 1e9);
      fflush(stdout);
    }
  }
  p->ops->destroy(p);  // frees p
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; i++) sizes.push_back(strtoull(argv[i], nullptr, 0));
  if (sizes.empty()) sizes = {1 << 10, 1 << 20, 64 << 20};
  char dir[] = "/tmp/gloo_p2p_bench.XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  pid_t child = fork();
  if (child == 0) _exit(RunRank(1, dir, sizes));
  int rc = RunRank(0, dir, sizes);
  int status = 0;
  waitpid(child, &status, 0);
  std::string cleanup = std::string("rm -rf ") + dir;
  if (system(cleanup.c_str()) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}
