"""Hardware: the Unitree G1 over Unitree's low-level DDS protocol (``rt/lowcmd`` / ``rt/lowstate``).

* :mod:`~contactflow.hardware.unitree_msgs`: the ``unitree_hg`` IDL types (Cyclone DDS dataclasses)
  and their fixed little-endian packing;
* :mod:`~contactflow.hardware.crc`: the CRC-32 of every message;
* :mod:`~contactflow.hardware.dds`: Cyclone DDS participant bound to one network interface;
* :mod:`~contactflow.hardware.unitree`: the driver logic (motor slots, base-state estimator, safety,
  ``LowCmd_`` construction), without dora or DDS;
* :mod:`~contactflow.hardware.emulator`: a G1 on DDS played by the project's MuJoCo G1.

Protocol facts: docs/hardware.md and unitree_dds.md (Unitree's public SDK and IDL). This package
imports ``cyclonedds`` (the ``hardware`` extra) only in the modules that talk DDS.
"""
