/* fluidvim VNF — the release version, reported in `ready` and on the console. It is not written
 * here: the Makefile reads fluidvim/__init__.py (the one version source) and passes
 * -DFLUIDVIM_VERSION, so the kernel cannot say another version than the Python package. */
#ifndef FLUIDVIM_VERSION_H
#define FLUIDVIM_VERSION_H

#ifndef FLUIDVIM_VERSION
#error "FLUIDVIM_VERSION is set by unikernel/Makefile from fluidvim/__init__.py"
#endif
#define VERSION FLUIDVIM_VERSION

#endif
