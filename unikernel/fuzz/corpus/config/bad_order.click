FromDevice(0) -> fw -> ToDevice(1);
fw :: IPFilter(allow all);