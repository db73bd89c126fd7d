"""The spec's implementation; the public face is :mod:`multiverse.spec`.

``models`` (the sections, as pydantic models), ``loading`` (safe YAML with the
line of every key), ``problems`` (validation errors as one line each),
``checks`` (what types cannot say), ``axes`` (axes, exclusions and the
primary against the grid they make) and ``parse`` (all of it, in order).
"""
