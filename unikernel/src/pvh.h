/* fluidvim VNF — Xen PVH boot ABI (hvm_start_info, as QEMU/qboot fill it). */
#ifndef FLUIDVIM_PVH_H
#define FLUIDVIM_PVH_H
#include "kstd.h"

#define HVM_START_MAGIC 0x336ec578u

struct hvm_start_info {
	uint32_t magic;
	uint32_t version;
	uint32_t flags;
	uint32_t nr_modules;
	uint64_t modlist_paddr;
	uint64_t cmdline_paddr;
	uint64_t rsdp_paddr;
	uint64_t memmap_paddr;   /* version >= 1 */
	uint32_t memmap_entries;
	uint32_t reserved;
};

struct hvm_memmap_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type;
	uint32_t reserved;
};

extern uint64_t pvh_start_info;
extern uint64_t boot_entry_tsc;

#endif
