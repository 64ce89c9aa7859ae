"""The contactflow dora nodes, installed as :mod:`contactflow.nodes` (``setup.py`` maps this folder).

One module per node kind; each is runnable three ways, all equivalent: the installed executable
``contactflow-<kind>`` (``_`` -> ``-``; what the shipped graphs name in ``path:``), ``python -m
contactflow.nodes.<kind>``, or the file itself (``path: ../nodes/<kind>.py`` in a graph of this
checkout). The library (:mod:`contactflow`) never imports this package: it is the dora side.
"""
