/* fluidvim VNF — PVH entry (32-bit protected mode), long-mode switch, interrupt stubs. */
#define XEN_ELFNOTE_PHYS32_ENTRY 18
#define LAPIC_EOI 0xfee000b0
#define IRQ_VEC_BASE 0x20
#define IRQ_VEC_COUNT 64

/* ---- PVH note: QEMU (and qboot) jump to the 32-bit entry with ebx = hvm_start_info ---- */
	.section .note.pvh, "a", @note
	.p2align 2
	.long 4                         /* namesz */
	.long 8                         /* descsz */
	.long XEN_ELFNOTE_PHYS32_ENTRY
	.asciz "Xen"
	.p2align 2
	.quad _start32

	.section .text.boot, "ax"
	.code32
	.globl _start32
_start32:
	cli
	cld
	movl %ebx, pvh_start_info
	rdtsc
	movl %eax, boot_entry_tsc
	movl %edx, boot_entry_tsc+4
	lgdt gdt_ptr

	/* clear .bss (page tables, stack and all C zero-initialised data live there) */
	movl $__bss_start, %edi
	movl $__bss_end, %ecx
	subl %edi, %ecx
	shrl $2, %ecx
	xorl %eax, %eax
	rep stosl

	/* identity map 0..4 GiB with 2 MiB pages: PML4[0] -> PDPT[0..3] -> 4 page directories */
	movl $boot_pdpt, %eax
	orl $3, %eax
	movl %eax, boot_pml4
	movl $boot_pd, %eax
	orl $3, %eax
	movl $boot_pdpt, %edi
	movl $4, %ecx
1:	movl %eax, (%edi)
	addl $4096, %eax
	addl $8, %edi
	loop 1b
	movl $boot_pd, %edi
	movl $0x83, %eax                /* present | writable | 2 MiB page */
	xorl %ecx, %ecx
2:	movl %eax, (%edi,%ecx,8)
	cmpl $2032, %ecx                /* 0xfe000000 and up (IOAPIC, virtio-mmio, LAPIC): uncached */
	jb 3f
	orl $0x18, (%edi,%ecx,8)        /* PCD | PWT */
3:	addl $0x200000, %eax
	incl %ecx
	cmpl $2048, %ecx
	jb 2b

	movl $boot_pml4, %eax
	movl %eax, %cr3
	movl %cr4, %eax
	orl $((1 << 5) | (1 << 9) | (1 << 10)), %eax   /* PAE, OSFXSR, OSXMMEXCPT */
	movl %eax, %cr4
	movl $0xc0000080, %ecx          /* EFER */
	rdmsr
	orl $(1 << 8), %eax             /* LME */
	wrmsr
	movl %cr0, %eax
	andl $~((1 << 2) | (1 << 29) | (1 << 30)), %eax  /* clear EM, NW, CD */
	orl $((1 << 31) | (1 << 16) | (1 << 5) | (1 << 1) | 1), %eax /* PG, WP, NE, MP, PE */
	movl %eax, %cr0
	ljmp $0x08, $_start64

	.code64
_start64:
	movl $0x10, %eax
	movl %eax, %ds
	movl %eax, %es
	movl %eax, %ss
	movl %eax, %fs
	movl %eax, %gs
	leaq boot_stack_top(%rip), %rsp
	xorl %ebp, %ebp
	movl pvh_start_info(%rip), %edi
	call kmain
4:	cli
	hlt
	jmp 4b

/* ---- exceptions: push (error code), vector; save registers; call exc_handler(frame) ---- */
.macro EXC vec
	.p2align 3
exc_\vec:
	.if (\vec == 8) || (\vec >= 10 && \vec <= 14) || (\vec == 17) || (\vec == 21) || (\vec == 29) || (\vec == 30)
	.else
	pushq $0
	.endif
	pushq $\vec
	jmp exc_common
.endm

	.text
	.irp v, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	EXC \v
	.endr

exc_common:
	pushq %rax
	pushq %rbx
	pushq %rcx
	pushq %rdx
	pushq %rsi
	pushq %rdi
	pushq %rbp
	pushq %r8
	pushq %r9
	pushq %r10
	pushq %r11
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	movq %rsp, %rdi
	andq $-16, %rsp
	call exc_handler
5:	cli
	hlt
	jmp 5b

/* ---- device / timer interrupts: note the vector in irq_hit[], EOI, and return with IF clear
 *      (the main loop runs with interrupts off and only enables them in `sti; hlt`; it acks the
 *      device that raised the line, so a level-asserted line cannot storm) ---- */
.macro IRQ vec
	.p2align 4
irq_\vec:
	movb $1, irq_hit+\vec(%rip)
	pushq %rax
	movabsq $LAPIC_EOI, %rax
	movl $0, (%rax)
	popq %rax
	andq $~0x200, 16(%rsp)
	iretq
.endm

	.altmacro
	.set i, 0
	.rept IRQ_VEC_COUNT
	IRQ %i
	.set i, i + 1
	.endr
	.noaltmacro

	.globl irq_spurious
irq_spurious:
	iretq

	.section .rodata
	.p2align 3
	.globl exc_stub_table
exc_stub_table:
	.irp v, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	.quad exc_\v
	.endr
	.globl irq_stub_table
irq_stub_table:
	.altmacro
.macro IRQREF vec
	.quad irq_\vec
.endm
	.set i, 0
	.rept IRQ_VEC_COUNT
	IRQREF %i
	.set i, i + 1
	.endr
	.noaltmacro

	.p2align 3
gdt:
	.quad 0
	.quad 0x00af9a000000ffff        /* 0x08: 64-bit code */
	.quad 0x00cf92000000ffff        /* 0x10: data */
gdt_end:
gdt_ptr:
	.word gdt_end - gdt - 1
	.quad gdt

	.data
	.p2align 3
	.globl pvh_start_info, boot_entry_tsc
pvh_start_info:
	.quad 0
boot_entry_tsc:
	.quad 0

	.bss
	.p2align 12
boot_pml4:
	.skip 4096
boot_pdpt:
	.skip 4096
boot_pd:
	.skip 4 * 4096
	.globl irq_hit
irq_hit:
	.skip IRQ_VEC_COUNT
	.p2align 4
boot_stack:
	.skip 65536
boot_stack_top:
