"""Systems: the profiles that describe hardware and software a workload runs on — devices
(``profiles``), clusters (``cluster``), measured rates (``measurements``), model presets (``presets``) —
and the catalog that finds them (built-ins read through ``importlib.resources``, user copies in the
config dir shadowing them explicitly).
"""
