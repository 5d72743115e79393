/* The hvdsparse command's subcommands. */
#ifndef HVDS_LAUNCHER_H_
#define HVDS_LAUNCHER_H_

#ifdef __cplusplus
extern "C" {
#endif

/* `hvdsparse run ...`: argv holds the words after "run". Returns the process exit code. */
int hvds__launcher_run(int argc, char** argv);
/* `horovodrun ...`: the same with --horovod-alias always on; argv holds the words after the
 * command name. Returns the process exit code. */
int hvds__launcher_horovodrun(int argc, char** argv);
/* `hvdsparse check-build`: prints what this build supports. Returns 0. */
int hvds__launcher_check_build(void);
/* `hvdsparse check-build --topology [-np N]`: the same, then the hwloc topology and the binding
 * and GPU of each of N local ranks (check_topology.c). Returns the process exit code. */
int hvds__launcher_check_topology(int argc, char** argv);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_H_ */
