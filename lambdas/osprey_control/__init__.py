"""The Osprey control plane: what the Lambda functions run (docs/architecture.md).

Layers, lowest first; a package imports only its own layer and those below (tests/architecture checks it):

1. the pure core, no AWS import: ``policy``, ``derivation`` (the engine), ``contract``, ``errors``, ``wiring``,
   ``telemetry``;
2. ``registry`` (the only owner of the DynamoDB table) and ``aws`` (clients);
3. ``planner`` (pure) and ``gang`` (its front pure);
4. ``backends``: one package per scheduler behind one protocol and one table;
5. ``ingest``, ``metrics``, ``custom_rules``, ``policy_store``;
6. ``steps``: the cycle's steps and the gang watch's, each a module.

The Lambda entry points are ``osprey_handlers`` (Powertools plus one call into a step); the CLI, the SDK and the
simulator are the ``osprey`` package.
"""

__all__: list[str] = []
