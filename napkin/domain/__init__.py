"""Domain objects: what a user describes. ``Model`` (architecture), ``Workload`` (sequence, batches),
``Layout`` (parallel degrees, sharding, recomputation) and the enums they use. No file reads, no I/O.
"""
