// probe reflector: every frame received on NIC 0 goes back out with addresses swapped
FromDevice(0) -> EtherMirror -> ToDevice(0);
