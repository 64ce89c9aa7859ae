"""Recordings: what a run leaves behind, and what can be done with it.

- :mod:`~contactflow.recording.store`: the on-disk format (one Arrow IPC stream per port plus a manifest), its
  writer and reader;
- :mod:`~contactflow.recording.replay`: planning a replay of a recording into a graph;
- :mod:`~contactflow.recording.export`: export to CSV / Parquet / MCAP, and plots;
- :mod:`~contactflow.recording.summary`: the run summary metrics;
- :mod:`~contactflow.recording.viewer`: the rerun viewer of a live run or a recording.
"""
