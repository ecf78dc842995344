/* fluidvim VNF — PCI bus 0 scan; all config-space access happens in ring 0 inside one kcall. */
#include "pci.h"
#include "arch.h"

static inline uint32_t addr(unsigned dev, unsigned fn, unsigned off)
{
	return 0x80000000u | (dev << 11) | (fn << 8) | (off & 0xfc);
}

static uint32_t rd32(unsigned dev, unsigned fn, unsigned off)
{
	outl(0xcf8, addr(dev, fn, off));
	return inl(0xcfc);
}

static void wr32(unsigned dev, unsigned fn, unsigned off, uint32_t v)
{
	outl(0xcf8, addr(dev, fn, off));
	outl(0xcfc, v);
}

static uint64_t pci_present_k(uint64_t a, uint64_t b, uint64_t c)
{
	uint32_t id = rd32(0, 0, 0);
	return id != 0xffffffffu && id != 0;
}

bool pci_present(void) { return KCALL(pci_present_k, 0, 0, 0) != 0; }

struct find_args { uint16_t vendor, dev_lo, dev_hi; struct pci_dev *out; int max; };

static uint64_t pci_find_k(uint64_t argp, uint64_t b, uint64_t c)
{
	struct find_args *a = (struct find_args *)(uintptr_t)argp;
	int n = 0;
	uint16_t next_io = 0xc000;
	/* i440FX/PIIX3 (QEMU pc): INTx of slot s, pin p goes to PIRQ[(s - 1 + p - 1) & 3], which the
	 * PIRQRC registers (00:01.0 0x60..0x63) map to an ISA IRQ (= IO-APIC GSI). qboot writes
	 * interrupt-line values that assume a different swizzle, so compute the GSI ourselves. */
	uint32_t pirqrc = 0;
	bool piix = rd32(1, 0, 0) == 0x70008086u;
	if (piix)
		pirqrc = rd32(1, 0, 0x60);
	for (unsigned dev = 0; dev < 32 && n < a->max; dev++) {
		uint32_t id = rd32(dev, 0, 0);
		if ((id & 0xffff) == 0xffff || id == 0)
			continue;
		unsigned nfn = 1;
		if ((id & 0xffff) != 0x8086 && (rd32(dev, 0, 0x0c) >> 16) & 0x80) /* skip chipset functions */
			nfn = 8;
		for (unsigned fn = 0; fn < nfn && n < a->max; fn++) {
			if (fn)
				id = rd32(dev, fn, 0);
			if ((uint16_t)id != a->vendor || (uint16_t)(id >> 16) < a->dev_lo || (uint16_t)(id >> 16) > a->dev_hi)
				continue;
			struct pci_dev *d = &a->out[n++];
			d->dev = dev;
			d->fn = fn;
			d->vendor = (uint16_t)id;
			d->device = (uint16_t)(id >> 16);
			uint32_t bar0 = rd32(dev, fn, 0x10);
			if ((bar0 & 1) && (bar0 & ~3u) == 0) { /* unassigned I/O BAR: place it ourselves */
				wr32(dev, fn, 0x10, next_io);
				next_io += 0x100;
				bar0 = rd32(dev, fn, 0x10);
			}
			d->bar0 = bar0;
			uint32_t cmd = rd32(dev, fn, 0x04);
			if ((cmd & 0x5) != 0x5)
				wr32(dev, fn, 0x04, (cmd & 0xffff) | 0x5); /* I/O space + bus master */
			uint32_t r3c = rd32(dev, fn, 0x3c);
			uint8_t pin = (uint8_t)(r3c >> 8);
			d->irq_line = (uint8_t)r3c;
			if (piix && pin >= 1 && pin <= 4) {
				uint8_t route = (uint8_t)(pirqrc >> (8 * ((dev - 1 + pin - 1) & 3)));
				d->irq_line = (route & 0x80) ? 0xff : (route & 0x0f);
			}
		}
	}
	return (uint64_t)n;
}

int pci_find(uint16_t vendor, uint16_t dev_lo, uint16_t dev_hi, struct pci_dev *out, int max)
{
	struct find_args a = { vendor, dev_lo, dev_hi, out, max };
	return (int)KCALL(pci_find_k, &a, 0, 0);
}
