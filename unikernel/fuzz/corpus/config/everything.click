/* block
comment */
FromDevice(0)
  -> cl :: Classifier(ip and tcp and dst port 80-88, src net 10.0.0.0/8 and not udp, ethertype 0x0806, ip6, icmp, -)
  -> ToDevice(1);
cl[1] -> [0] Counter -> ToDevice(1)
cl[2] -> ToDevice(1); cl[3] -> Discard; cl[4] -> EtherMirror -> ToDevice(0)
cl[5] -> f :: IPFilter(allow src host 192.168.1.1, allow udp and port 53, deny dst port 22, deny all);
f -> ToDevice(1); f[1] -> Discard
FromDevice(1) -> Queue -> ToDevice(0)