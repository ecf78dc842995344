// stateless firewall between NIC 0 (inside) and NIC 1 (outside):
// web, DNS, ping and ARP leave; everything else is counted and dropped
fw :: IPFilter(allow arp, allow icmp, allow tcp dst port 80, allow tcp dst port 443,
               allow udp dst port 53, deny all);
FromDevice(0) -> fw -> out :: Counter -> ToDevice(1);
fw[1] -> denied :: Counter -> Discard;
FromDevice(1) -> in :: Counter -> ToDevice(0);
