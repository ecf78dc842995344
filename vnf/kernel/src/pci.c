/* fluidvim VNF — PCI bus 0 scan. */
#include "pci.h"
#include "arch.h"

static inline uint32_t addr(unsigned dev, unsigned fn, unsigned off)
{
	return 0x80000000u | (dev << 11) | (fn << 8) | (off & 0xfc);
}

uint32_t pci_read32(unsigned dev, unsigned fn, unsigned off)
{
	outl(0xcf8, addr(dev, fn, off));
	return inl(0xcfc);
}

void pci_write32(unsigned dev, unsigned fn, unsigned off, uint32_t v)
{
	outl(0xcf8, addr(dev, fn, off));
	outl(0xcfc, v);
}

uint16_t pci_read16(unsigned dev, unsigned fn, unsigned off)
{
	outl(0xcf8, addr(dev, fn, off));
	return inw((uint16_t)(0xcfc + (off & 2)));
}

void pci_write16(unsigned dev, unsigned fn, unsigned off, uint16_t v)
{
	outl(0xcf8, addr(dev, fn, off));
	outw((uint16_t)(0xcfc + (off & 2)), v);
}

bool pci_present(void)
{
	uint32_t id = pci_read32(0, 0, 0);
	return id != 0xffffffffu && id != 0;
}

void pci_scan(void (*cb)(const struct pci_dev *d, void *arg), void *arg)
{
	for (unsigned dev = 0; dev < 32; dev++) {
		uint32_t id = pci_read32(dev, 0, 0);
		if ((id & 0xffff) == 0xffff || id == 0)
			continue;
		unsigned nfn = 1;
		if ((id & 0xffff) != 0x8086 && (pci_read32(dev, 0, 0x0c) >> 16) & 0x80) /* skip chipset functions */
			nfn = 8;
		for (unsigned fn = 0; fn < nfn; fn++) {
			if (fn)
				id = pci_read32(dev, fn, 0);
			if ((id & 0xffff) == 0xffff || id == 0)
				continue;
			struct pci_dev d = { dev, fn, (uint16_t)id, (uint16_t)(id >> 16) };
			cb(&d, arg);
		}
	}
}
