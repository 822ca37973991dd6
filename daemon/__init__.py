"""Node daemon (cellbed-node): wraps libvirt/QEMU to start, measure and live-migrate VMs."""
