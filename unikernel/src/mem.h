/* fluidvim VNF — boot-time bump allocator for DMA memory (identity mapped, never freed). */
#ifndef FLUIDVIM_MEM_H
#define FLUIDVIM_MEM_H
#include "kstd.h"

void mem_init(uint64_t start_info);
/* Returns NULL when out of RAM. The memory is NOT zeroed (fresh guest RAM is zero; buffers the
 * device fills need not be, and not touching them keeps boot fast). */
void *mem_alloc(size_t size, size_t align);
uint64_t mem_ram_top(void);

#endif
