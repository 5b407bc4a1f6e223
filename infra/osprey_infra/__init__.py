"""CDK constructs of the Osprey control plane, one construct per module.

Layers, lowest first; a module imports only from its own layer or lower, so there is no import cycle
(``tests/infra/test_import_graph.py`` holds the same list and checks both):

1. settings, no CDK: :mod:`.config`, :mod:`.slurm_config`;
2. building blocks: :mod:`.nag` (acknowledging cdk-nag findings), :mod:`.function` (one Lambda and its role),
   :mod:`.state_machines`, :mod:`.registry_table`, :mod:`.table_access`, :mod:`.permissions` (the shared grants,
   and the small protocols grants take);
3. the control plane's own constructs: :mod:`.gangs` and :mod:`.gang_watch`, :mod:`.cycle_state_machine`,
   :mod:`.planning`, :mod:`.policy_store`, :mod:`.event_ingestion`, :mod:`.cycle_schedule`,
   :mod:`.observability` and :mod:`.alarms`;
4. :mod:`.backends`: one construct per backend, which creates what the backend needs and grants what its
   code calls;
5. :mod:`.control_plane`: ``OspreyControlPlane``, which only composes; nothing but :mod:`.stack` imports it;
6. :mod:`.stack`: the ``Osprey`` stack, one control plane.
"""

__all__: list[str] = []
