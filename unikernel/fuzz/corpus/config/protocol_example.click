// comments run to end of line; statements end with ';' or a newline
fw :: IPFilter(allow tcp dst port 80, allow arp, deny all);
FromDevice(0) -> Classifier(ip proto tcp, arp) -> fw -> Counter -> ToDevice(1);
FromDevice(1) -> ToDevice(0);
c :: Classifier(ip, -);  c[1] -> Discard;
