q :: Queue(64); rl :: RateLimiter(1000, 10);
FromDevice(0) -> q -> rl -> ToDevice(1);
rl[1] -> Discard;
FromDevice(1) -> EtherMirror -> ToDevice(1);