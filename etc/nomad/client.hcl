# Nomad client config for the fluidvim unikernel task driver.
# Build the plugin: (cd nomad_driver && go build -o bin/fluidvim-unikernel .) and copy it into
# plugin_dir. The client must run as root (QEMU taps, bridge ioctls, /dev/kvm).
data_dir   = "/var/lib/nomad"
plugin_dir = "/opt/nomad/plugins"

client {
  enabled = true
}

plugin "unikernel" {
  config {
    qemu           = "qemu-system-x86_64"   # name on PATH or absolute path
    accel          = "auto"                 # auto | kvm | tcg
    kernel         = "/usr/share/fluidvim/fluidvim-vnf.elf"  # default for tasks without `kernel`
    run_dir        = "/run/fluidvim-nomad"  # sockets, console logs: <run_dir>/<vnf uuid>/
    boot_timeout   = "30s"
    warm_pool_size = 0                      # accepted, not implemented yet (cold launches only)
  }
}
