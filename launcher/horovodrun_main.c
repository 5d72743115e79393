/* horovodrun: `hvdsparse run` with the Horovod alias on, so that an unmodified Horovod command
 * line and script (`horovodrun -np 4 python train.py` importing horovod.torch) run on hvdsparse.
 * `horovodrun -cb` and `--check-build` print what this build supports, as horovodrun does. */
#include "launcher.h"

int main(int argc, char** argv) { return hvds__launcher_horovodrun(argc - 1, argv + 1); }
