/* The hvdsparse command's subcommands. */
#ifndef HVDS_LAUNCHER_H_
#define HVDS_LAUNCHER_H_

#ifdef __cplusplus
extern "C" {
#endif

/* `hvdsparse run ...`: argv holds the words after "run". Returns the process exit code. */
int hvds__launcher_run(int argc, char** argv);
/* `hvdsparse check-build`: prints what this build supports. Returns 0. */
int hvds__launcher_check_build(void);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_H_ */
