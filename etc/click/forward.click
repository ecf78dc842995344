// bump in the wire: everything from NIC 0 to NIC 1 and back
FromDevice(0) -> ToDevice(1);
FromDevice(1) -> ToDevice(0);
