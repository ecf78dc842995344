# Nomad client config for the fluidvim unikernel task driver.
# Build the plugin: (cd nomad_driver && go build -o bin/fluidvim-unikernel .) and copy it into
# plugin_dir. The client must run as root (QEMU taps, bridge ioctls, /dev/kvm).
# Nomad matches the plugin block's name against the binary's file name in plugin_dir (a plugin
# without a block is not loaded); jobs use the driver name, `driver = "unikernel"`.
data_dir   = "/var/lib/nomad"
plugin_dir = "/opt/nomad/plugins"

client {
  enabled = true
}

plugin "fluidvim-unikernel" {
  config {
    qemu           = "auto"   # name on PATH or absolute path; auto = the microvm build on KVM when installed
    accel          = "auto"                 # auto | kvm | tcg
    firmware       = "auto"   # auto = fluidvim-pvh.bin beside the kernel if there; qemu = qboot; or a path
    kernel         = "/usr/share/fluidvim/fluidvim-vnf.elf"  # default for tasks without `kernel`
    # Directories whose files jobs may name as `kernel` or `click_file`, besides their own task
    # directory (local/, secrets/, the alloc's shared alloc/), symlinks resolved first; as Nomad's
    # qemu driver's image_paths. The kernels above and in warm_pool are allowed anyway. Any job
    # may boot any file listed here: list only directories of VNF images.
    image_paths    = []
    run_dir        = "/run/fluidvim-nomad"  # sockets, console logs: <run_dir>/<vnf uuid>/
    # A nic bridge starting with this prefix is made when a task names it and deleted with the
    # last VNF on it: an isolated L2 segment between VNFs of this client (the orchestrator's
    # load probe wires its probe and generator VNFs so). "" = every bridge must exist already.
    private_bridges = "fvp"
    net_backend    = "tap"    # tap = QEMU's taps; vhost-user = fluidvim-vhost-net (vhost) per VNF
    vhost_net_binary = "/usr/libexec/fluidvim/fluidvim-vhost-net"   # make -C vhost
    vcpu_nice      = 10       # vCPU threads below QEMU's I/O thread (the guest busy-polls); 0 = as started
    boot_timeout   = "30s"
    fingerprint_period = "30s"              # how often vnfs / session_slots.* are re-reported
    share_memory       = true               # QEMUs KSM-mergeable, no THP (idle VNF ~8 MiB PSS)
    # the host's power as `fluidvim metrics serve` writes it ([vnf] run_dir/power.json): node
    # attribute driver.unikernel.host_watts, each task's watts and joules (vnf-stats.json, events)
    power_state        = "/run/fluidvim/power.json"

    # Warm pool: shells booted ahead (QEMU running, VNF booted and unconfigured, taps created but
    # not attached). A task whose kernel, memory_mb, vcpus, number of NICs and flow_timeout_ms
    # match a block takes a ready shell (attach taps + configure: a few ms) unless it sets
    # warm = false; otherwise it boots cold. One block per shape; size = 0 kills that shape's
    # shells. They survive a client restart and are adopted by the next plugin process.
    warm_pool {
      kernel = "/usr/share/fluidvim/fluidvim-vnf.elf"
      size   = 2
      nics   = 2
      # memory_mb = 32  vcpus = 1  session_slots = 1024  flow_timeout_ms = 30000
    }
  }
}
