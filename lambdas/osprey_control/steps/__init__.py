"""The cycle's steps, one module each: ``lease``, ``collect``, ``derive``, ``apply``, ``plan`` and ``finish``,
with what they hand each other in ``payload`` and the deadline every step stops by in ``deadline``.

Handlers call one function of a step; a step composes the libraries (registry, metrics, derivation, backends)
and never imports a handler.
"""
