"""Engines: pure functions over domain objects and profile numbers — FLOPs and time (``compute``),
training memory (``memory``, ``activations``), the step-time model (``step``), collectives
(``comm``), serving (``serving``), the layout planner (``planner``), scaling laws (``scaling``) and number
formats (``number_formats``). No engine reads a file or a global; each cites its formulas.
"""
