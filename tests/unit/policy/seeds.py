"""The seed policy of DESIGN §3 / issue 2, verbatim, in both forms."""

SEED_POLICY = """\
apiVersion: osprey.aws/v1
kind: PriorityDerivationPolicy
metadata:
  name: training-policy
  namespace: training
spec:
  derivationRules:
  - metric: gpu_utilization
    weight: 0.6
    scaling: linear
    minPriority: 10
    maxPriority: 100
  - metric: memory_bandwidth_utilization
    weight: 0.3
    scaling: logarithmic
    minPriority: 5
    maxPriority: 100
  - metric: node_interconnect_latency
    weight: 0.1
    scaling: inverse
    minPriority: 1
    maxPriority: 50
  coScheduling:
    enabled: true
    gangTimeoutSeconds: 120
    requiredMinWorkers: 80
"""

CUSTOM_RULE = """\
  - custom:
      arn: arn:aws:lambda:us-east-1:123456789012:function:osprey-custom-derivation
      fallbackPriority: 50
"""

# The seed's second form: the custom rule appended to derivationRules (before coScheduling).
SEED_WITH_CUSTOM = SEED_POLICY.replace("  coScheduling:\n", CUSTOM_RULE + "  coScheduling:\n")

DESIGN_EXAMPLE = """\
apiVersion: osprey.aws/v1
kind: PriorityDerivationPolicy
metadata: {name: training-policy, namespace: training}
spec:
  derivationRules:
  - {metric: gpu_utilization, weight: 0.6, scaling: linear, minPriority: 10, maxPriority: 100}
  - {metric: memory_bandwidth_utilization, weight: 0.3, scaling: logarithmic, minPriority: 5, maxPriority: 100}
  - {metric: node_interconnect_latency, weight: 0.1, scaling: inverse, minPriority: 1, maxPriority: 50}
  - custom: {arn: "arn:aws:lambda:us-east-1:123456789012:function:osprey-rule-spot", fallbackPriority: 50}
  coScheduling: {enabled: true, gangTimeoutSeconds: 120, requiredMinWorkers: 80}
  maxPriorityChange: 10
"""
