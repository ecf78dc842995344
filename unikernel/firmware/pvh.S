/* fluidvim-pvh: a minimal boot firmware for QEMU's microvm machine and PVH ELF kernels.
 *
 * `qemu -M microvm -bios fluidvim-pvh.bin -kernel K.elf -append CMDLINE`: QEMU has already
 * copied K's loadable segments into guest RAM and put K's PVH entry point, the command line and
 * the RAM size into fw_cfg (hw/i386/x86.c, load_elfboot). This firmware reads those with four
 * fw_cfg DMA transfers, writes an hvm_start_info (version 1: command line, a two-entry memory
 * map), and jumps to the entry in 32-bit protected mode with %ebx = start_info, as the x86/HVM
 * direct boot ABI says. That is all qboot (QEMU's default microvm firmware) does for such a
 * kernel, minus its PCI scan, MP/SMBIOS tables and byte-wise fw_cfg directory reads.
 *
 * Why: under KVM-PVM (this project's hosts, unikernel/README.md) a guest's ring-0 code is
 * emulated instruction by instruction, and qboot runs ~6 ms of it per boot plus ~70 port exits;
 * this firmware runs ~100 instructions and 5 port exits. On ordinary KVM it is just shorter.
 *
 * Image: 64 KiB (QEMU wants a multiple of 64 KiB), mapped at 0xffff0000; the CPU starts at
 * 0xfffffff0 in real mode with CS.base = 0xffff0000, so image offsets are 16-bit offsets in CS.
 * Scratch RAM below 1 MiB: 0x6000 start_info, 0x6040 memory map, 0x6100 the DMA descriptor,
 * 0x6200 fw_cfg values, 0x7000 the command line (at most CMDLINE_MAX bytes, NUL-terminated).
 * A kernel without a PVH entry (fw_cfg entry 0: no -kernel, or not a PVH ELF) gets a message on
 * COM1 and a halted CPU, never a jump to 0. */

#define BASE                0xffff0000
#define FW_CFG_DMA_HI       0x514
#define FW_CFG_DMA_LO       0x518
#define FW_CFG_RAM_SIZE     0x03
#define FW_CFG_KERNEL_ENTRY 0x10
#define FW_CFG_CMDLINE_SIZE 0x14
#define FW_CFG_CMDLINE_DATA 0x15
#define DMA_CTL_READ        0x02
#define DMA_CTL_SELECT      0x08
#define COM1                0x3f8

#define START_INFO          0x6000
#define MEMMAP              0x6040
#define DMA_DESC            0x6100   /* FWCfgDmaAccess: be32 control, be32 length, be64 address */
#define V_ENTRY             0x6200
#define V_CMDLINE_SIZE      0x6204
#define V_RAM_SIZE          0x6208   /* 64-bit, little-endian */
#define CMDLINE             0x7000
#define CMDLINE_MAX         0x8000
#define STACK_TOP           0x6000
#define LOW_RAM_END         0x9fc00  /* below the EBDA / legacy hole */
#define HIGH_RAM            0x100000
#define RAM_CAP             0x80000000 /* microvm keeps at least 2 GiB of RAM below 4 GiB */
#define HVM_START_MAGIC     0x336ec578

	.section .text, "ax"
	.code16
	.globl _start
_start:
	cli
	cld
	lgdtl %cs:gdt_desc
	movl %cr0, %eax
	orl $1, %eax                    /* PE */
	movl %eax, %cr0
	ljmpl $0x08, $(BASE + start32)

	.code32
start32:
	movl $0x10, %eax
	movl %eax, %ds
	movl %eax, %es
	movl %eax, %ss
	movl %eax, %fs
	movl %eax, %gs
	movl $STACK_TOP, %esp
	/* The descriptor's address, high half: 0 once. QEMU ORs each low-half write into it and
	 * starts the transfer, so the same low half (one descriptor) is written every time. */
	xorl %eax, %eax
	movw $FW_CFG_DMA_HI, %dx
	outl %eax, %dx

	movl $FW_CFG_KERNEL_ENTRY, %eax
	movl $V_ENTRY, %edi
	movl $4, %ecx
	call dma_read
	movl $FW_CFG_CMDLINE_SIZE, %eax
	movl $V_CMDLINE_SIZE, %edi
	movl $4, %ecx
	call dma_read
	movl $FW_CFG_RAM_SIZE, %eax
	movl $V_RAM_SIZE, %edi
	movl $8, %ecx
	call dma_read

	movl V_ENTRY, %esi
	testl %esi, %esi
	jz no_kernel

	movb $0, CMDLINE
	movl V_CMDLINE_SIZE, %ecx
	testl %ecx, %ecx
	jz 1f
	cmpl $CMDLINE_MAX, %ecx
	jbe 2f
	movl $CMDLINE_MAX, %ecx
2:	movl $FW_CFG_CMDLINE_DATA, %eax
	movl $CMDLINE, %edi
	call dma_read
	movb $0, CMDLINE + CMDLINE_MAX - 1
1:
	/* RAM top below 4 GiB: the RAM size, at most RAM_CAP */
	movl V_RAM_SIZE, %eax
	cmpl $0, V_RAM_SIZE + 4
	jne 3f
	cmpl $RAM_CAP, %eax
	jbe 4f
3:	movl $RAM_CAP, %eax
4:	subl $HIGH_RAM, %eax            /* size of the entry at 1 MiB */

	/* the memory map: [0, LOW_RAM_END) and [1 MiB, top), both RAM (type 1) */
	movl $0, MEMMAP + 0
	movl $0, MEMMAP + 4
	movl $LOW_RAM_END, MEMMAP + 8
	movl $0, MEMMAP + 12
	movl $1, MEMMAP + 16
	movl $0, MEMMAP + 20
	movl $HIGH_RAM, MEMMAP + 24
	movl $0, MEMMAP + 28
	movl %eax, MEMMAP + 32
	movl $0, MEMMAP + 36
	movl $1, MEMMAP + 40
	movl $0, MEMMAP + 44

	/* hvm_start_info, version 1 (every field written: a guest reset keeps RAM) */
	movl $HVM_START_MAGIC, START_INFO + 0
	movl $1, START_INFO + 4         /* version */
	movl $0, START_INFO + 8         /* flags */
	movl $0, START_INFO + 12        /* nr_modules */
	movl $0, START_INFO + 16        /* modlist_paddr */
	movl $0, START_INFO + 20
	movl $CMDLINE, START_INFO + 24  /* cmdline_paddr */
	movl $0, START_INFO + 28
	movl $0, START_INFO + 32        /* rsdp_paddr */
	movl $0, START_INFO + 36
	movl $MEMMAP, START_INFO + 40   /* memmap_paddr */
	movl $0, START_INFO + 44
	movl $2, START_INFO + 48        /* memmap_entries */
	movl $0, START_INFO + 52

	movl $START_INFO, %ebx
	jmp *%esi

/* dma_read: fw_cfg item %eax -> %ecx bytes at %edi (QEMU completes it within the port write) */
dma_read:
	shll $16, %eax
	orl $(DMA_CTL_SELECT | DMA_CTL_READ), %eax
	bswapl %eax
	movl %eax, DMA_DESC + 0
	bswapl %ecx
	movl %ecx, DMA_DESC + 4
	movl $0, DMA_DESC + 8
	bswapl %edi
	movl %edi, DMA_DESC + 12
	movl $(((DMA_DESC & 0xff) << 24) | ((DMA_DESC & 0xff00) << 8)), %eax /* bswap32(DMA_DESC) */
	movw $FW_CFG_DMA_LO, %dx
	outl %eax, %dx
	ret

no_kernel:
	movl $(BASE + msg_no_kernel), %esi
	movw $COM1, %dx
5:	lodsb
	testb %al, %al
	jz 6f
	outb %al, %dx
	jmp 5b
6:	hlt
	jmp 6b

msg_no_kernel:
	.asciz "fluidvim-pvh: no PVH kernel in fw_cfg (needs -kernel with a PVH ELF note)\r\n"

	.p2align 3
gdt:
	.quad 0
	.quad 0x00cf9b000000ffff        /* 0x08: 32-bit code, base 0, limit 4 GiB */
	.quad 0x00cf93000000ffff        /* 0x10: data, base 0, limit 4 GiB */
gdt_desc:
	.word gdt_desc - gdt - 1
	.long BASE + gdt

	/* the reset vector: CS.base 0xffff0000, IP 0xfff0 */
	.code16
	.org 0xfff0
	jmp _start
	.org 0x10000
