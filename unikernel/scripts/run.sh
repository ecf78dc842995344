#!/bin/sh
# Boot the VNF by hand on QEMU microvm (virtio-mmio) or pc + qboot (legacy virtio-pci); the
# Python launch core builds the same argv (see ../README.md). run-microvm.sh / run-pc.sh call this.
#   MACHINE=microvm|pc scripts/run.sh [-n NICS] [-a "kernel cmdline"] [-c CTL_SOCKET] [-l CONSOLE_LOG] [-t] [-s] [-- extra qemu args]
# NIC i uses the existing tap device tvt<i> (create with: ip tuntap add tvt0 mode tap).
# -t: TCG instead of KVM (pass the host TSC rate with -a "... tsc_khz=N" for real time units).
# Control channel: a UNIX socket QEMU listens on (server=on,wait=off), on a virtio-console
# (port 0 of a virtio-serial device), or with -s on COM2 (16550, the slow fallback);
# connect with e.g. `socat - UNIX-CONNECT:/tmp/vnf-ctl.sock` and send {"id":1,"op":"ping"}.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
case ${MACHINE:-microvm} in
microvm) mach="microvm,x-option-roms=off,pit=off,pic=off,rtc=off,isa-serial=on,acpi=off" bus=device ;;
pc) mach="pc -bios /usr/share/qemu/qboot.rom" bus=pci ;;
*) echo "MACHINE must be microvm or pc" >&2; exit 2 ;;
esac
nics=2 append="name=vnf" ctl=/tmp/vnf-ctl.sock con=/tmp/vnf-console.log accel=kvm ctldev=virtio
while [ $# -gt 0 ]; do
	case $1 in
	-n) nics=$2; shift 2 ;;
	-a) append=$2; shift 2 ;;
	-c) ctl=$2; shift 2 ;;
	-l) con=$2; shift 2 ;;
	-t) accel=tcg; shift ;;
	-s) ctldev=com2; shift ;;
	--) shift; break ;;
	*) echo "usage: $0 [-n NICS] [-a CMDLINE] [-c CTL_SOCKET] [-l CONSOLE_LOG] [-t] [-s] [-- qemu args]" >&2; exit 2 ;;
	esac
done
set -- "$@"
i=0
netargs=""
while [ $i -lt "$nics" ]; do
	netargs="$netargs -netdev tap,id=n$i,ifname=tvt$i,script=no,downscript=no -device virtio-net-$bus,netdev=n$i,mac=52:54:00:00:00:0$((i + 1))"
	i=$((i + 1))
done
if [ "$ctldev" = virtio ]; then
	ctlargs="-device virtio-serial-$bus,max_ports=1 -device virtconsole,chardev=ctl,nr=0"
else
	ctlargs="-device isa-serial,chardev=ctl,iobase=0x2f8,irq=3"
fi
rm -f "$ctl"
# shellcheck disable=SC2086
exec qemu-system-x86_64 \
	-M $mach -accel $accel -cpu max,-arch-capabilities \
	-m 32 -smp 1 -nodefaults -no-user-config -display none -no-reboot \
	-kernel "$here/build/fluidvim-vnf.elf" -append "$append" \
	-chardev file,id=con,path="$con" -serial chardev:con \
	-chardev socket,id=ctl,path="$ctl",server=on,wait=off $ctlargs \
	$netargs "$@"
