/* fluidvim VNF — RAM: the PVH start-info memory map says where RAM ends (below 4 GiB, which is all
 * the boot page tables map); allocations start after the image's .bss. */
#include "mem.h"
#include "pvh.h"

extern char __image_end[];
static uintptr_t next, top;

void mem_init(uint64_t si_addr)
{
	const struct hvm_start_info *si = (const struct hvm_start_info *)(uintptr_t)si_addr;
	next = (uintptr_t)__image_end;
	top = 0;
	if (si && si->magic == HVM_START_MAGIC && si->version >= 1 && si->memmap_paddr) {
		const struct hvm_memmap_entry *e = (const void *)(uintptr_t)si->memmap_paddr;
		for (uint32_t i = 0; i < si->memmap_entries; i++) {
			if (e[i].type != 1)
				continue;
			uint64_t lo = e[i].addr, hi = e[i].addr + e[i].size;
			if (lo <= next && hi > next)
				top = hi > 0xfe000000ull ? 0xfe000000ull : hi;
		}
	}
	if (!top)
		top = 16u << 20; /* no memory map: assume 16 MiB */
}

void *mem_alloc(size_t size, size_t align)
{
	uintptr_t p = (next + align - 1) & ~(uintptr_t)(align - 1);
	if (p + size > top || p + size < p)
		return NULL;
	next = p + size;
	return (void *)p;
}

uint64_t mem_ram_top(void) { return top; }
