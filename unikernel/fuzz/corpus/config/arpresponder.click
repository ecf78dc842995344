FromDevice(0) -> a :: ARPResponder(10.0.0.1, 10.1.0.0/16) -> ToDevice(0);
a[1] -> ToDevice(1);
