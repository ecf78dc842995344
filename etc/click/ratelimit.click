// shape NIC 0 -> NIC 1 to 1000 packets/s (bursts of 50) behind a bounded queue
FromDevice(0) -> q :: Queue(256) -> RateLimiter(1000, 50) -> ToDevice(1);
FromDevice(1) -> ToDevice(0);
