// shm_bench: the shared-memory transport alone, without the runtime: N forked processes run
// ping-pong and allreduce over a size sweep and rank 0 prints the median times. Not a test.
//   shm_bench [-np N] [-b MIN] [-e MAX] [-n ITERS] [--ring BYTES] [--poll US] [--coll BYTES]
// Columns: one-way ping-pong between ranks 0 and 1, hvds__allreduce over the rings (halving-
// doubling up to 16 MiB, then the ring), and hvds__shm_allreduce through the segment.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collectives.h"
#include "shm_p2p.h"
#include "shm_test_util.h"

namespace {

using namespace shm_test;

// The key-value store over files (as shm_proc_test's).
struct FileKv {
  std::string dir;
  static std::string Path(FileKv* self, const char* key) {
    std::string k = key;
    for (char& c : k)
      if (c == '/') c = '_';
    return self->dir + "/" + k;
  }
  static hvds_result_t Set(void* ctx, const char* key, const void* val, size_t len) {
    std::string path = Path(static_cast<FileKv*>(ctx), key), tmp = path + ".t";
    FILE* f = fopen(tmp.c_str(), "wb");
    if (f == nullptr) return HVDS_SYSTEM_ERROR;
    fwrite(val, 1, len, f);
    fclose(f);
    return rename(tmp.c_str(), path.c_str()) == 0 ? HVDS_SUCCESS : HVDS_SYSTEM_ERROR;
  }
  static hvds_result_t Get(void* ctx, const char* key, int timeout_ms, void** val, size_t* len) {
    std::string path = Path(static_cast<FileKv*>(ctx), key);
    auto t0 = Clock::now();
    for (;;) {
      if (FILE* f = fopen(path.c_str(), "rb")) {
        std::string v;
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) v.append(buf, n);
        fclose(f);
        *val = malloc(v.size() + 1);
        memcpy(*val, v.data(), v.size());
        *len = v.size();
        return HVDS_SUCCESS;
      }
      if (MsSince(t0) > timeout_ms) return HVDS_TIMEOUT;
      usleep(1000);
    }
  }
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Rank(int rank, int np, FileKv* kv, const hvds_shm_options_t* o, size_t lo, size_t hi,
         int iters) {
  hvds_kv_t k = {kv, FileKv::Set, FileKv::Get};
  hvds_p2p_t* p = nullptr;
  char err[512];
  if (hvds__shm_p2p_create_opts(&k, "bench", rank, np, 30000, o, &p, err, sizeof err) !=
      HVDS_SUCCESS) {
    fprintf(stderr, "rank %d: %s\n", rank, err);
    return 1;
  }
  uint64_t tag = 1;
  if (rank == 0)
    printf("%12s %14s %14s %10s %14s %10s\n", "bytes", "pingpong_us", "allreduce_us", "busbw",
           "segment_us", "busbw");
  for (size_t bytes = lo; bytes <= hi; bytes *= 4) {
    std::vector<float> buf(bytes / 4 + 1, 1.0f);
    std::vector<double> pp, ar;
    for (int i = 0; i < iters + 2; i++) {
      double t = 0;
      auto t0 = Clock::now();
      if (rank == 0) {
        hvds__p2p_send(p, 1, buf.data(), bytes, tag);
        hvds__p2p_recv(p, 1, buf.data(), bytes, tag);
        t = MsSince(t0) * 500;  // one way, us
      } else if (rank == 1) {
        hvds__p2p_recv(p, 0, buf.data(), bytes, tag);
        hvds__p2p_send(p, 0, buf.data(), bytes, tag);
      }
      tag++;
      if (i >= 2) pp.push_back(t);
    }
    for (int i = 0; i < iters + 2; i++) {
      hvds_coll_opts_t co = {tag++, HVDS_ALGO_AUTO, 0, 16 << 20};
      auto t0 = Clock::now();
      if (hvds__allreduce(p, buf.data(), bytes / 4, HVDS_FLOAT32, HVDS_SUM, &co) != HVDS_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", rank, p->error);
        return 1;
      }
      if (i >= 2) ar.push_back(MsSince(t0) * 1000);
    }
    std::vector<double> sg;
    for (int i = 0; i < iters + 2; i++) {
      auto t0 = Clock::now();
      if (hvds__shm_allreduce(p, buf.data(), bytes / 4, HVDS_FLOAT32, HVDS_SUM) != HVDS_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", rank, p->error);
        return 1;
      }
      if (i >= 2) sg.push_back(MsSince(t0) * 1000);
    }
    double a = Median(ar), g = Median(sg);
    if (rank == 0)
      printf("%12zu %14.1f %14.1f %10.3f %14.1f %10.3f\n", bytes, Median(pp), a,
             bytes * 2.0 * (np - 1) / np / (a * 1e3), g, bytes * 2.0 * (np - 1) / np / (g * 1e3));
  }
  p->ops->destroy(p);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int np = 4, iters = 20;
  size_t lo = 64 << 10, hi = 64 << 20;
  hvds_shm_options_t o = HVDS_SHM_OPTIONS_INIT;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    long long v = atoll(argv[i + 1]);
    if (a == "-np") np = (int)v;
    if (a == "-b") lo = (size_t)v;
    if (a == "-e") hi = (size_t)v;
    if (a == "-n") iters = (int)v;
    if (a == "--ring") o.ring_bytes = (size_t)v;
    if (a == "--poll") o.poll_us = (int)v;
    if (a == "--coll") o.coll_bytes = (size_t)v;
  }
  char tmpl[] = "/tmp/hvds_shm_bench.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  FileKv kv{tmpl};
  std::vector<pid_t> pids;
  for (int r = 0; r < np; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      int rc = Rank(r, np, &kv, &o, lo, hi, iters);
      fflush(stdout);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  int bad = 0;
  for (pid_t pid : pids) {
    int st = 0;
    waitpid(pid, &st, 0);
    bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  }
  std::string cmd = std::string("rm -rf ") + tmpl;
  (void)system(cmd.c_str());
  return bad;
}
