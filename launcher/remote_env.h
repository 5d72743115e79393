/* Which of the launcher's environment variables travel to workers on remote hosts. As with
 * horovodrun, every exportable variable does, but for a deny list of those that describe the
 * launcher's own shell, session or machine rather than the job:
 *   BASH_FUNC_* (exported shell functions), OLDPWD, PWD, SHLVL, _ (the shell's own), HOSTNAME,
 *   SSH_* (the launcher's ssh session and agent), and *CUDA_VISIBLE_DEVICES (the remote host has
 *   its own GPUs).
 * Names that are not shell identifiers are never forwarded. The job's own variables (identity,
 * secret, knobs, -x) are set separately and win over the launcher's. */
#ifndef HVDS_LAUNCHER_REMOTE_ENV_H_
#define HVDS_LAUNCHER_REMOTE_ENV_H_

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when entry ("NAME=value") is forwarded to remote workers. */
int hvds__remote_env_forwards(const char* entry);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_REMOTE_ENV_H_ */
