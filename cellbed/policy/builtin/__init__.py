"""Cellbed's built-in policies, one adapter per stage and name, written against the public API
(``cellbed.policy.api``) like any plugin and registered the same way: as entry points in
Cellbed's ``pyproject.toml`` (``[project.entry-points."cellbed.policy.<stage>"]``). The
algorithms themselves stay where the papers put them (``cellbed.policy.masb``, ``.megha``,
``.scores``); these modules only give them their stage's signature and declare their parameters.
"""
