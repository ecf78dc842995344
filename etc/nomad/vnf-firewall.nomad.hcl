# A fluidvim VNF as a Nomad job: a two-NIC firewall between bridges br0 and br1.
# The bridges must exist on the client (ip link add br0 type bridge; ip link set br0 up).
job "vnf-firewall" {
  datacenters = ["dc1"]
  type        = "service"

  group "fw" {
    count = 1

    # only clients that have both bridges: the plugin fingerprints each Linux bridge as
    # driver.unikernel.bridge.<name> = true (refreshed every fingerprint_period)
    constraint {
      attribute = "${attr.driver.unikernel.bridge.br0}"
      value     = "true"
    }
    constraint {
      attribute = "${attr.driver.unikernel.bridge.br1}"
      value     = "true"
    }

    task "fw" {
      driver = "unikernel"

      config {
        # kernel        = "local/vnf.elf"  # default: the plugin config's; else a file in the
        #                                    # task dir (artifact/template) or under image_paths
        memory_mb     = 32     # at most resources.memory; unset = resources.memory
        vcpus         = 1      # unset = the reserved cores, else 1
        session_slots = 1024
        # one virtio-net NIC per nic block, in order: bridge unset or "" = unplugged; mac
        # unset = generated (the older form nics = ["br0", "br1"], macs = [...] still works)
        nic {
          bridge = "br0"
        }
        nic {
          bridge = "br1"
          # mac  = "fa:16:3e:00:00:02"
        }
        click_config  = <<-EOT
          fw :: IPFilter(allow tcp dst port 80, allow arp, deny all);
          FromDevice(0) -> fw -> Counter -> ToDevice(1);
          FromDevice(1) -> ToDevice(0);
        EOT
        # click_file  = "local/fw.click"  # instead of click_config; SIGHUP re-reads it
        # warm        = false   # never take a pre-booted shell from the warm pool
      }

      # its counters: nomad alloc exec -task fw <alloc> stats   (also: ping, slots, console)

      # what Nomad reserves and the plugin enforces: QEMU runs in a cgroup limited to
      # memory_mb + 64 MiB (QEMU's allowance) and this CPU share; `cores = 1` instead of
      # `cpu` pins the vCPU to a reserved core
      resources {
        cpu    = 200
        memory = 64
      }
    }
  }
}
