"""A real cell's model twin (``cell.kind = "twin"``): ``driver`` (the real runner's VMs on model
hosts, in virtual time) and ``fit`` (the real guests' overhead, fitted from a real run; pure)."""
