FromDevice(0) -> Counter -> ToDevice(1);
FromDevice(1) -> ToDevice(0);