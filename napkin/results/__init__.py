"""Results that render themselves: the result base (``result``), derivations for ``--explain``
(``explain``), tables and JSON (``render``, the only module that imports rich), plots (``plot``) and the
catalog views (``hardware_views``, ``cluster_views``).
"""
