/* fluidvim VNF — freestanding basics shared by the kernel and the host test build. */
#ifndef FLUIDVIM_KSTD_H
#define FLUIDVIM_KSTD_H
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#ifdef FLUIDVIM_HOST   /* host unit tests and fuzzers: use the C library */
#include <string.h>
#else
void *memcpy(void *d, const void *s, size_t n);
void *memmove(void *d, const void *s, size_t n);
void *memset(void *d, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
int strcmp(const char *a, const char *b);
int strncmp(const char *a, const char *b, size_t n);
#endif

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

static inline uint16_t bswap16(uint16_t x) { return (uint16_t)((x >> 8) | (x << 8)); }
static inline uint32_t bswap32(uint32_t x) { return __builtin_bswap32(x); }
#define ntohs bswap16
#define htons bswap16
#define ntohl bswap32
#define htonl bswap32

#endif
