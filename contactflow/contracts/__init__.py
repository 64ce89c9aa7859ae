"""What nodes exchange and how graphs wire them.

- :mod:`~contactflow.contracts.messages`: the message contracts (Arrow schemas, shapes, units) and their
  packing/unpacking;
- :mod:`~contactflow.contracts.ports`: the one port table (every node's inputs and outputs);
- :mod:`~contactflow.contracts.wiring`: the checks of a dataflow YAML against the port table
  (``contactflow check``);
- :mod:`~contactflow.contracts.catalogue`: the node catalogue generated from the port table (``docs/nodes.md``).
"""
