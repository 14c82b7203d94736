"""Files and terminals: the one safe reader and atomic writer (``files``), YAML in and out (``yamlio``),
the terminal width rule (``terminal``). Nothing else in napkin opens a file by itself.
"""
