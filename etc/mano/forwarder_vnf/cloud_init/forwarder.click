// counting forwarder: NIC 0 <-> NIC 1, with a counter per direction (fluidvim vnf stats)
FromDevice(0) -> east :: Counter -> ToDevice(1);
FromDevice(1) -> west :: Counter -> ToDevice(0);
