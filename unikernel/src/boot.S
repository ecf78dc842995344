/* fluidvim VNF — PVH entry (32-bit protected mode), long-mode switch, ring-3 entry, kcall gate,
 * interrupt stubs.
 *
 * Privilege split: after a short ring-0 setup the kernel runs its main loop in ring 3 (CPL 3,
 * IOPL 3, IF 1, all pages user-accessible: one address space, no protection intended). Reason:
 * under KVM-PVM (this project's CI/dev hosts: the `kvm_pvm` module, shadow paging, no VMX) guest
 * ring-0 code is emulated instruction by instruction (~0.5 us per loop iteration) while guest
 * ring-3 code runs natively (~2000x faster). Privileged work goes through `kcall`: a `ud2` at
 * the known address kcall_ud2, whose #UD handler calls a C function in ring 0 and returns its
 * result. (Not `int n`: PVM emulates the first instructions after an iretq to ring 3, and its
 * emulator cannot do `int n` in 64-bit mode, so that raises #UD at random; exceptions always
 * work.) On ordinary KVM/TCG this costs an exception round trip and nothing else changes. */
#define XEN_ELFNOTE_PHYS32_ENTRY 18
#define LAPIC_EOI 0xfee000b0
#define IRQ_VEC_COUNT 61             /* 0x20..0x5c; 0x5f APIC spurious */

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
	/* No .bss clearing and no page-table building: QEMU's ELF loader zero-fills p_memsz beyond
	 * p_filesz, and every instruction here is slow under PVM. The identity map (0-1 GiB RAM and
	 * 3-4 GiB MMIO, 2 MiB pages, user-accessible) is static data below. */
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
1:	cli
	hlt
	jmp 1b

/* enter_user(fn, stack): continue in ring 3 at fn with the given stack, IOPL 3, IF 1. */
	.text
	.globl enter_user
enter_user:
	pushq $0x1b                     /* SS: user data | RPL 3 */
	pushq %rsi                      /* RSP */
	pushq $0x3202                   /* RFLAGS: IOPL 3, IF */
	pushq $0x23                     /* CS: user code64 | RPL 3 */
	pushq %rdi                      /* RIP */
	movl $0x1b, %eax
	movl %eax, %ds
	movl %eax, %es
	iretq

/* kcall: `call kcall_ud2` with rax = fn, rdi/rsi/rdx = args; runs fn in ring 0 (IF 0), result
 * in rax. Every other register is preserved. */
	.globl kcall_ud2
kcall_ud2:
	ud2
	ret

kcall_entry:
	pushq %rcx
	pushq %rdx
	pushq %rsi
	pushq %rdi
	pushq %r8
	pushq %r9
	pushq %r10
	pushq %r11
	pushq %rbp
	movq %rsp, %rbp
	andq $-16, %rsp
	call *%rax
	movq %rbp, %rsp
	popq %rbp
	popq %r11
	popq %r10
	popq %r9
	popq %r8
	popq %rdi
	popq %rsi
	popq %rdx
	popq %rcx
	iretq

/* ---- exceptions: push (error code), vector; save registers; call exc_handler(frame); if it
 *      returns (it emulated a ring-3 in/out), resume ---- */
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

	.irp v, 0,1,2,3,4,5,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	EXC \v
	.endr

	.p2align 3
exc_6:                                  /* #UD: a kcall, or a real invalid opcode */
	cmpq $kcall_ud2, (%rsp)
	jne 1f
	addq $2, (%rsp)
	jmp kcall_entry
1:	pushq $0
	pushq $6
	jmp exc_common

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
	movq %rsp, %rbp
	andq $-16, %rsp
	call exc_handler
	movq %rbp, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %r11
	popq %r10
	popq %r9
	popq %r8
	popq %rbp
	popq %rdi
	popq %rsi
	popq %rdx
	popq %rcx
	popq %rbx
	popq %rax
	addq $16, %rsp
	iretq

/* ---- device / timer interrupts: note the vector in irq_hit[], EOI, return; the main loop
 *      polls the device. A vector with a hook (virtio devices on level-triggered lines,
 *      possibly shared) first runs irq_run_hook(vector) in C, which acks the devices so the
 *      line drops before the EOI. COM2 and the virtio-console on virtio-mmio (a line of its
 *      own) are edge-triggered; the main loop serves and acks them. ---- */
.macro IRQ vec
	.p2align 4
irq_\vec:
	movb $1, irq_hit+\vec(%rip)
	movb $\vec, irq_last(%rip)     /* what ended a halt: cpu_idle (apic.c) */
	cmpq $0, irq_hook+8*\vec(%rip)
	jne 1f
	pushq %rax
	movabsq $LAPIC_EOI, %rax
	movl $0, (%rax)
	popq %rax
	iretq
1:	pushq $\vec
	jmp irq_hooked
.endm

irq_hooked:
	pushq %rax
	pushq %rcx
	pushq %rdx
	pushq %rsi
	pushq %rdi
	pushq %r8
	pushq %r9
	pushq %r10
	pushq %r11
	pushq %rbp
	movq 80(%rsp), %rdi             /* the vector index pushed by the stub */
	movq %rsp, %rbp
	andq $-16, %rsp
	call irq_run_hook
	movq %rbp, %rsp
	movabsq $LAPIC_EOI, %rax
	movl $0, (%rax)
	popq %rbp
	popq %r11
	popq %r10
	popq %r9
	popq %r8
	popq %rdi
	popq %rsi
	popq %rdx
	popq %rcx
	popq %rax
	addq $8, %rsp
	iretq

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

	.data
	.p2align 3
	.globl gdt, gdt_tss
gdt:
	.quad 0
	.quad 0x00af9a000000ffff        /* 0x08: kernel code64 */
	.quad 0x00cf92000000ffff        /* 0x10: kernel data */
	.quad 0x00cff2000000ffff        /* 0x18: user data (DPL 3) */
	.quad 0x00affa000000ffff        /* 0x20: user code64 (DPL 3) */
gdt_tss:
	.quad 0, 0                      /* 0x28: 64-bit TSS, filled by intr_early() */
gdt_end:
gdt_ptr:
	.word gdt_end - gdt - 1
	.quad gdt

	.p2align 3
	.globl pvh_start_info, boot_entry_tsc
pvh_start_info:
	.quad 0
boot_entry_tsc:
	.quad 0

	.p2align 12
boot_pml4:
	.quad boot_pdpt + 7             /* present | writable | user */
	.fill 511, 8, 0
boot_pdpt:
	.quad boot_pd0 + 7              /* 0-1 GiB: RAM */
	.quad 0
	.quad 0
	.quad boot_pd3 + 7              /* 3-4 GiB: IOAPIC 0xfec00000, virtio-mmio 0xfeb00000, LAPIC */
	.fill 508, 8, 0
boot_pd0:
	.set addr, 0
	.rept 512
	.quad addr + 0x87               /* present | writable | user | 2 MiB */
	.set addr, addr + 0x200000
	.endr
boot_pd3:
	.set addr, 0xc0000000
	.rept 512
	.quad addr + 0x9f               /* + PCD | PWT: uncached MMIO */
	.set addr, addr + 0x200000
	.endr

	.bss
	.globl irq_hit, irq_hook, irq_last
irq_hit:
	.skip IRQ_VEC_COUNT
irq_last:                               /* the vector index of the latest interrupt */
	.skip 1
	.p2align 3
irq_hook:                               /* per vector: nonzero = call irq_run_hook() first */
	.skip 8 * IRQ_VEC_COUNT
	.p2align 4
	.globl boot_stack_top, kernel_stack_top
boot_stack:                             /* ring-0 boot, then the ring-3 main loop's stack */
	.skip 65536
boot_stack_top:
kernel_stack:                           /* ring 0 (TSS.rsp0): interrupts and kcalls from ring 3 */
	.skip 16384
kernel_stack_top:
